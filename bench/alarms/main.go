// Command alarms measures a node's alarms: -actors actors each set one
// alarm through HTTP (examples/reminders' way: an event that sets it; once
// due in an hour, to time the sets on this bucket, then again for the
// run), then the node delivers them. Two runs per bucket: burst, every alarm due
// at the same instant (how many the node fires a second, waking each
// actor from its bucket), and spread, the alarms due evenly over -spread
// (how late each fires, p50 and p99, with the rest pending). Lateness is
// the handler's start minus the alarm's time; the node's own counters
// (alarms fired, its poller's bucket requests) come from its /metrics.
//
//	go run ./bench/alarms [-actors 10000] [-store dir,s3] [-spread 10s]
//
// The directory bucket is in a temporary directory; the S3 bucket is a
// versitygw (internal/s3test) on 127.0.0.1, with explicit credentials.
// Both are removed, and the server stopped, however the run ends; every
// loop is bounded by its count and by -timeout.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/internal/s3test"
	"github.com/wasmkeep/wasmkeep/node"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/dirstore"
	"github.com/wasmkeep/wasmkeep/ownership/s3store"
)

// beep is the class: POST ?at=UNIX_MS sets its alarm; the alarm records
// how late it fired.
type beep struct{ rec *recorder }

func (b beep) Handle(ctx context.Context, req *actors.Request, _ actors.Storage) (*actors.Response, error) {
	ms, err := strconv.ParseInt(req.Query.Get("at"), 10, 64)
	if err != nil {
		return actors.Text(http.StatusBadRequest, err.Error()), nil
	}
	if err := actors.SetAlarm(ctx, "beep", time.UnixMilli(ms)); err != nil {
		return nil, err
	}
	return actors.Text(http.StatusOK, "set"), nil
}

func (b beep) HandleAlarm(_ context.Context, a actors.Alarm, st actors.Storage) error {
	b.rec.fired(time.Since(a.At))
	return st.Put("fired", []byte("yes"))
}

// recorder keeps the lateness of each firing.
type recorder struct {
	mu    sync.Mutex
	late  []time.Duration
	last  time.Time
	first time.Time
}

func (r *recorder) fired(late time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if len(r.late) == 0 {
		r.first = now
	}
	r.late, r.last = append(r.late, late), now
}

func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.late = nil
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.late)
}

func main() {
	n := flag.Int("actors", 10000, "actors, one alarm each")
	stores := flag.String("store", "dir,s3", "the buckets to measure: dir, s3, or both")
	spread := flag.Duration("spread", 10*time.Second, "the window the spread run's alarms are due over")
	timeout := flag.Duration("timeout", 5*time.Minute, "bound of each run")
	flag.Parse()
	for _, s := range strings.Split(*stores, ",") {
		var err error
		switch s {
		case "dir":
			err = onDir(*n, *spread, *timeout)
		case "s3":
			err = onS3(*n, *spread, *timeout)
		default:
			err = fmt.Errorf("unknown store %q", s)
		}
		if err != nil {
			log.Fatal(err)
		}
	}
}

func onDir(n int, spread, timeout time.Duration) error {
	dir, err := os.MkdirTemp("", "wasmkeep-alarms-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	b, err := dirstore.Open(dir)
	if err != nil {
		return err
	}
	defer b.Close()
	return measure("directory bucket", b, n, spread, timeout)
}

func onS3(n int, spread, timeout time.Duration) error {
	srv, stop, err := s3test.StartMain()
	if err != nil {
		return err
	}
	defer stop()
	for k, v := range srv.Env() {
		os.Setenv(k, v)
	}
	b, err := s3store.New(context.Background(), srv.Config("bench/"))
	if err != nil {
		return err
	}
	return measure("versitygw "+s3test.VersitygwVersion+" on 127.0.0.1", b, n, spread, timeout)
}

func measure(where string, b ownership.Bucket, n int, spread, timeout time.Duration) error {
	rec := &recorder{}
	reg := actors.BuiltIn()
	if err := reg.Register("beep", beep{rec: rec}); err != nil {
		return err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ctx := context.Background()
	nd, err := node.Start(ctx, node.Config{
		Core:   ownership.DefaultConfig("bench", "i1"),
		Bucket: b, Listener: lis, Registry: reg,
		Actors: actorhost.Config{IdleTimeout: 2 * time.Second, MaxResident: 2 * n},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		_ = nd.Stop(sctx)
	}()
	url := "http://" + lis.Addr().String()
	fmt.Printf("## %s, %d actors, one alarm each\n", where, n)
	for _, run := range []struct {
		name   string
		window time.Duration
	}{{"burst", 0}, {"spread", spread}} {
		rec.reset()
		// How long the sets take on this bucket, with alarms due in an
		// hour (set again below: their entries stay in the index as
		// hints due later, which cost a pass nothing).
		start := time.Now()
		if err := setAll(url, n, func(int) time.Time { return start.Add(time.Hour) }); err != nil {
			return err
		}
		lead := time.Since(start)*3/2 + 3*time.Second
		before := scrape(url)
		start = time.Now()
		setAt := start.Add(lead)
		if err := setAll(url, n, func(i int) time.Time {
			if run.window == 0 {
				return setAt
			}
			return setAt.Add(time.Duration(i) * run.window / time.Duration(n))
		}); err != nil {
			return err
		}
		sets := time.Since(start)
		if time.Now().After(setAt) {
			return fmt.Errorf("%s: setting %d alarms took %v, past their time (%v after the start)", run.name, n, sets, lead)
		}
		deadline := time.Now().Add(timeout)
		for rec.count() < n && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(time.Second) // duplicates, had there been any, show now
		after := scrape(url)
		rec.mu.Lock()
		late := slices.Clone(rec.late)
		first, last := rec.first, rec.last
		rec.mu.Unlock()
		slices.Sort(late)
		if len(late) < n {
			return fmt.Errorf("%s: %d of %d alarms fired within %v", run.name, len(late), n, timeout)
		}
		took := last.Sub(setAt)
		fmt.Printf("%s: set in %v; fired %d (of %d) from their time to the last in %v",
			run.name, sets.Round(time.Millisecond), len(late), n, took.Round(time.Millisecond))
		if run.window == 0 {
			fmt.Printf(" (%.0f alarms/s; first fired %v after its time)", float64(n)/took.Seconds(), first.Sub(setAt).Round(time.Millisecond))
		}
		fmt.Printf("; lateness p50 %v, p99 %v, max %v; poller requests: %0.f lists, %0.f deletes; deliveries found gone %0.f\n",
			late[len(late)/2].Round(time.Millisecond), late[len(late)*99/100].Round(time.Millisecond), late[len(late)-1].Round(time.Millisecond),
			after["list"]-before["list"], after["delete"]-before["delete"], after["gone"]-before["gone"])
	}
	return nil
}

// setAll sets the alarms of n actors, at(i) for the i-th, 32 at a time.
func setAll(url string, n int, at func(int) time.Time) error {
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	next := make(chan int)
	errs := make(chan error, 32)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := range next {
				resp, err := c.Post(fmt.Sprintf("%s/actor/beep/a%05d?at=%d", url, i, at(i).UnixMilli()), "", nil)
				if err != nil {
					errs <- err
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("set a%05d: %s", i, resp.Status)
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	return <-errs
}

// scrape reads the alarm poller's bucket requests from the node's metrics.
func scrape(url string) map[string]float64 {
	out := map[string]float64{}
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, `wasmkeep_alarms_total{outcome="gone"} `); ok {
			out["gone"], _ = strconv.ParseFloat(rest, 64)
		}
		for _, op := range []string{"list", "delete"} {
			if rest, ok := strings.CutPrefix(line, `wasmkeep_alarm_bucket_requests_total{op="`+op+`"} `); ok {
				out[op], _ = strconv.ParseFloat(rest, 64)
			}
		}
	}
	return out
}
