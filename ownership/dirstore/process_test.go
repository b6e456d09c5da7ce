package dirstore

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/internal/storetest"
)

// The multi-process tests re-execute this test binary, each child running
// only TestChild, which these variables switch on and steer.
const (
	childEnv    = "WASMKEEP_LOGSTORE_CHILD" // the child's id
	childDirEnv = "WASMKEEP_LOGSTORE_DIR"
	// childCompactEnv: the child's compactMin, when set.
	childCompactEnv = "WASMKEEP_LOGSTORE_COMPACT"
	raceRounds      = 150
)

func startChild(t *testing.T, id int, dir string, env ...string) *storetest.Child {
	t.Helper()
	return storetest.StartChild(t, append([]string{childEnv + "=" + strconv.Itoa(id), childDirEnv + "=" + dir}, env...)...)
}

// TestTwoProcessRace: two OS processes, each with its own Store on one
// directory, race a create-only write and an if-match write on the same
// keys, in lock-step rounds. Every round has exactly one winner of each
// race, the loser is refused (not unknown), and the winner's write is
// what every process reads afterwards.
func TestTwoProcessRace(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in a child process")
	}
	dir := t.TempDir()
	s := openDir(t, dir)
	etags := make([]ownership.ETag, raceRounds)
	for r := range etags {
		etags[r] = mustPut(t, s, fmt.Sprintf("match/%d", r), "initial", ownership.IfAbsent())
	}
	children := []*storetest.Child{startChild(t, 0, dir), startChild(t, 1, dir)}
	var wins [2]int
	for r := range raceRounds {
		for i := range children {
			// Alternate which child hears "race" first.
			children[(r+i)%2].Send(t, fmt.Sprintf("race %d %s", r, etags[r]))
		}
		var create, match [2]string
		for i, c := range children {
			a := c.Answer(t)
			if len(a) != 1 || len(a[0]) != 2 {
				t.Fatalf("round %d: child %d answered %q", r, i, a)
			}
			create[i], match[i] = a[0][0], a[0][1]
		}
		for _, race := range []struct {
			name     string
			outcomes [2]string
			key      string
		}{
			{"create-only", create, fmt.Sprintf("create/%d", r)},
			{"if-match", match, fmt.Sprintf("match/%d", r)},
		} {
			o := race.outcomes
			winner := 0
			switch {
			case o[0] == "landed" && o[1] == "refused":
			case o[0] == "refused" && o[1] == "landed":
				winner = 1
			default:
				t.Fatalf("round %d, %s race: outcomes %q, want one landed and one refused", r, race.name, o)
			}
			wins[winner]++
			want := fmt.Sprintf("child-%d-round-%d", winner, r)
			wantBody(t, s, race.key, want, "")
			// The loser's process reads the winner's write too.
			got := get(t, children[1-winner], race.key)
			if got != want {
				t.Fatalf("round %d, %s race: the losing child reads %q, want %q", r, race.name, got, want)
			}
		}
	}
	t.Logf("%d rounds of two races: child 0 won %d, child 1 won %d", raceRounds, wins[0], wins[1])
}

// get asks a child for the body of key ("-" if missing).
func get(t *testing.T, c *storetest.Child, key string) string {
	t.Helper()
	c.Send(t, "get "+key)
	a := c.Answer(t)
	if len(a) != 1 || len(a[0]) != 3 {
		t.Fatalf("get %q: child answered %q", key, a)
	}
	return a[0][2]
}

// TestCompactionAcrossProcesses: a child process keeps reading and
// writing while the parent compacts, and the parent while the child
// compacts. Each follows the other's switches: no write is lost, and the
// two always read the same thing.
func TestCompactionAcrossProcesses(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in a child process")
	}
	dir := t.TempDir()
	s := openDir(t, dir)
	s.compactMin = 16 << 10
	c := startChild(t, 0, dir, childCompactEnv+"="+strconv.Itoa(16<<10))
	m := model{}
	compare := func(when string) {
		t.Helper()
		m.check(t, s)
		c.Send(t, "dump")
		got := map[string]string{}
		for _, f := range c.Answer(t) {
			got[f[0]] = f[1]
		}
		if len(got) != len(m) {
			t.Fatalf("%s: the child lists %d keys, want %d", when, len(got), len(m))
		}
		for k, v := range m {
			if got[k] != string(v.etag) {
				t.Fatalf("%s: the child reads %q at ETag %q, want %q", when, k, got[k], v.etag)
			}
		}
	}
	churn(t, s, m, 1)
	compare("before compaction")
	first := segmentPath(t, dir)
	churn(t, s, m, 10)
	if segmentPath(t, dir) == first {
		t.Fatal("the parent never compacted")
	}
	compare("after the parent compacted")

	// The child overwrites every key many times, compacting as it goes.
	before := segmentPath(t, dir)
	c.Send(t, "churn 20")
	for _, f := range c.Answer(t) {
		k := f[0]
		if f[1] == "-" {
			delete(m, k)
			continue
		}
		m[k] = struct {
			body string
			etag ownership.ETag
		}{strings.ReplaceAll(f[2], "_", " "), ownership.ETag(f[1])}
	}
	if segmentPath(t, dir) == before {
		t.Fatal("the child never compacted")
	}
	compare("after the child compacted")
	churn(t, s, m, 2)
	compare("after the parent wrote again")
	if segs := segments(t, dir); len(segs) != 1 {
		t.Fatalf("segments: %q, want one", segs)
	}
}

// TestKilledWriter: a process killed with SIGKILL while eight of its
// goroutines write loses none of the writes it acknowledged; a Store that
// was open all along sees them all, and writes on past whatever the
// killed process left half written.
func TestKilledWriter(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in a child process")
	}
	dir := t.TempDir()
	s := openDir(t, dir)
	storetest.KilledWriter(t, startChild(t, 0, dir), s, func() ownership.Bucket { return openDir(t, dir) })
}

// TestChild is the other process of the tests above; it does nothing
// unless started by them. Commands, one a line on stdin; every answer
// line starts with "> " and the last is "> end":
//
//	race R ETAG  create-only put of create/R, then if-match ETAG put of
//	             match/R; answers "<outcome> <outcome>"
//	get KEY      answers "KEY ETAG BODY", or "KEY - -" if missing
//	spam         writes new keys from eight goroutines until killed,
//	             answering "KEY ETAG" for each acknowledged write
//	dump         answers "KEY ETAG" for every key
//	churn N      N rounds of overwrites and deletes (see churn); answers
//	             "KEY ETAG BODY" for what it leaves, with '_' for ' ',
//	             and "KEY -" for each key it deleted
func TestChild(t *testing.T) {
	id := os.Getenv(childEnv)
	if id == "" {
		t.Skip("helper process of the multi-process tests")
	}
	s, err := Open(os.Getenv(childDirEnv))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v := os.Getenv(childCompactEnv); v != "" {
		n, _ := strconv.Atoi(v)
		s.compactMin = int64(n)
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		switch f[0] {
		case "race":
			storetest.Race(t, s, id, f[1], f[2])
		case "get":
			obj, err := s.Get(t.Context(), f[1])
			switch {
			case err == nil:
				fmt.Printf("> %s %s %s\n", f[1], obj.ETag, obj.Body)
			case ownership.OutcomeOf(err) == ownership.NotFound:
				fmt.Printf("> %s - -\n", f[1])
			default:
				t.Fatal(err)
			}
		case "dump":
			for _, k := range listKeys(t, s, "") {
				obj, err := s.Get(t.Context(), k)
				if err != nil {
					t.Fatal(err)
				}
				fmt.Printf("> %s %s\n", k, obj.ETag)
			}
		case "spam":
			storetest.Spam(s, func(i int) int { return 100 + i%5000 })
		case "churn":
			n, _ := strconv.Atoi(f[1])
			m := model{}
			for _, k := range listKeys(t, s, "") {
				obj, err := s.Get(t.Context(), k)
				if err != nil {
					t.Fatal(err)
				}
				m[k] = struct {
					body string
					etag ownership.ETag
				}{string(obj.Body), obj.ETag}
			}
			before := map[string]bool{}
			for k := range m {
				before[k] = true
			}
			churn(t, s, m, n)
			for k, v := range m {
				fmt.Printf("> %s %s %s\n", k, v.etag, strings.ReplaceAll(v.body, " ", "_"))
			}
			for k := range before {
				if _, ok := m[k]; !ok {
					fmt.Printf("> %s -\n", k)
				}
			}
		}
		fmt.Println("> end")
	}
}

// TestSuspectAcrossProcesses: a failed fdatasync in the parent, whose
// rewrite fails too, leaves the segment suspect; a child process that
// writes next rewrites it before appending, and the parent reads what the
// child wrote.
func TestSuspectAcrossProcesses(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in a child process")
	}
	dir := t.TempDir()
	s := openDir(t, dir)
	etag := mustPut(t, s, "k", "v1", ownership.IfAbsent())
	c := startChild(t, 0, dir)
	first := segmentPath(t, dir)
	s.sys.datasync = failDatasync
	if _, err := s.Put(t.Context(), "k", []byte("v2"), ownership.IfMatch(etag)); !errors.Is(err, ownership.ErrUnknownOutcome) {
		t.Fatalf("put with a failing sync: %v, want ErrUnknownOutcome", err)
	}
	s.sys.datasync = fdatasync

	c.Send(t, "churn 1")
	m := model{}
	for _, f := range c.Answer(t) {
		if f[1] != "-" {
			m[f[0]] = struct {
				body string
				etag ownership.ETag
			}{strings.ReplaceAll(f[2], "_", " "), ownership.ETag(f[1])}
		}
	}
	wantRewritten(t, dir, first)
	m.check(t, s)
	if m["k"].body != "v2" {
		t.Fatalf("the child read %q under k, want the unknown write v2", m["k"].body)
	}
}
