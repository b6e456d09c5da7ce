package sqlitestore

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// The multi-process tests re-execute this test binary, each child running
// only TestChild, which these variables switch on and steer.
const (
	childEnv    = "WASMKEEP_SQLITESTORE_CHILD" // the child's id
	childDirEnv = "WASMKEEP_SQLITESTORE_DIR"
	raceRounds  = 100
)

// child is a running TestChild. It reads one command per line on stdin and
// answers each with lines on stdout, the last of which is "end".
type child struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr bytes.Buffer
}

func startChild(t *testing.T, id int, dir string) *child {
	t.Helper()
	c := &child{cmd: exec.Command(os.Args[0], "-test.run=^TestChild$", "-test.count=1")}
	c.cmd.Env = append(os.Environ(), childEnv+"="+strconv.Itoa(id), childDirEnv+"="+dir)
	c.cmd.Stderr = &c.stderr
	var err error
	if c.in, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.out = bufio.NewScanner(stdout)
	c.out.Buffer(nil, 1<<20)
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.in.Close()
		if err := c.cmd.Wait(); err != nil && c.cmd.ProcessState != nil && !c.killed() {
			t.Errorf("child %d: %v\n%s", id, err, c.stderr.String())
		}
	})
	return c
}

func (c *child) killed() bool {
	return c.cmd.ProcessState != nil && strings.Contains(c.cmd.ProcessState.String(), "killed")
}

func (c *child) send(t *testing.T, cmd string) {
	t.Helper()
	if _, err := io.WriteString(c.in, cmd+"\n"); err != nil {
		t.Fatal(err)
	}
}

// answer reads the child's answer to one command, skipping anything the
// test framework prints.
func (c *child) answer(t *testing.T) [][]string {
	t.Helper()
	var lines [][]string
	for c.out.Scan() {
		line, ok := strings.CutPrefix(c.out.Text(), "> ")
		if !ok {
			continue
		}
		if line == "end" {
			return lines
		}
		lines = append(lines, strings.Fields(line))
	}
	t.Fatalf("child ended early: %v\n%s", c.out.Err(), c.stderr.String())
	return nil
}

// TestProcessRace: three OS processes, each with its own Store on one
// directory, race a create-only write and an if-match write on the same
// keys, in lock-step rounds. Every round has exactly one winner of each
// race, the losers are refused (not unknown), and the winner's write is
// what the parent reads afterwards.
func TestProcessRace(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in a child process")
	}
	dir := t.TempDir()
	s := openDir(t, dir)
	etags := make([]ownership.ETag, raceRounds)
	for r := range etags {
		etags[r] = mustPut(t, s, fmt.Sprintf("match/%d", r), "initial", ownership.IfAbsent())
	}
	children := []*child{startChild(t, 0, dir), startChild(t, 1, dir), startChild(t, 2, dir)}
	wins := make([]int, len(children))
	for r := range raceRounds {
		for i := range children {
			// Rotate which child hears "race" first.
			children[(r+i)%len(children)].send(t, fmt.Sprintf("race %d %s", r, etags[r]))
		}
		outcomes := make([][2]string, len(children))
		for i, c := range children {
			a := c.answer(t)
			if len(a) != 1 || len(a[0]) != 2 {
				t.Fatalf("round %d: child %d answered %q", r, i, a)
			}
			outcomes[i] = [2]string{a[0][0], a[0][1]}
		}
		for race, key := range []string{fmt.Sprintf("create/%d", r), fmt.Sprintf("match/%d", r)} {
			winner := -1
			for i := range children {
				switch outcomes[i][race] {
				case "landed":
					if winner >= 0 {
						t.Fatalf("round %d, %s: children %d and %d both landed", r, key, winner, i)
					}
					winner = i
				case "refused":
				default:
					t.Fatalf("round %d, %s: child %d: %s, want landed or refused", r, key, i, outcomes[i][race])
				}
			}
			if winner < 0 {
				t.Fatalf("round %d, %s: no child landed", r, key)
			}
			wins[winner]++
			wantBody(t, s, key, fmt.Sprintf("child-%d-round-%d", winner, r), "")
		}
	}
	t.Logf("wins per child: %v", wins)
}

// TestKilledWriter: a process writing from eight goroutines is killed
// (SIGKILL) mid-stream. Every write it acknowledged is there, in this
// process's Store and in a Store opened after, which writes on.
func TestKilledWriter(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in a child process")
	}
	dir := t.TempDir()
	s := openDir(t, dir)
	c := startChild(t, 0, dir)
	c.send(t, "spam")
	acked := map[string]ownership.ETag{}
	for len(acked) < 300 && c.out.Scan() {
		if f := strings.Fields(strings.TrimPrefix(c.out.Text(), "> ")); len(f) == 2 {
			acked[f[0]] = ownership.ETag(f[1])
		}
	}
	c.cmd.Process.Kill()
	c.cmd.Wait()
	if len(acked) < 300 {
		t.Fatalf("the child acknowledged only %d writes", len(acked))
	}
	check := func(s *Store) {
		t.Helper()
		for k, etag := range acked {
			obj, err := s.Get(t.Context(), k)
			if err != nil || obj.ETag != etag {
				t.Fatalf("get %q: %s, %v; want the acknowledged write %s", k, obj.ETag, err, etag)
			}
		}
	}
	check(s)
	mustPut(t, s, "after", "a", ownership.IfAbsent())
	check(openDir(t, dir))
}

// TestClaimOfAProcess: a claim another process holds is held until that
// process dies, whatever way, and then free.
func TestClaimOfAProcess(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in a child process")
	}
	dir := t.TempDir()
	s := openDir(t, dir)
	c := startChild(t, 0, dir)
	c.send(t, "claim node/n1")
	if a := c.answer(t); len(a) != 1 || a[0][0] != "free" {
		t.Fatalf("the child's claim: %q, want free", a)
	}
	if _, free, err := s.Claim("node/n1"); err != nil || free {
		t.Fatalf("claim held by a live process: free %v, %v; want held", free, err)
	}
	c.cmd.Process.Kill()
	c.cmd.Wait()
	release, free, err := s.Claim("node/n1")
	if err != nil || !free {
		t.Fatalf("claim of a killed process: free %v, %v; want free", free, err)
	}
	release()
}

// TestChild is the other process of the tests above; it does nothing
// unless started by them. Commands, one a line on stdin; every answer
// line starts with "> " and the last is "> end":
//
//	race R ETAG  create-only put of create/R, then if-match ETAG put of
//	             match/R; answers "<outcome> <outcome>"
//	spam         writes new keys from eight goroutines until killed,
//	             answering "KEY ETAG" for each acknowledged write
//	claim NAME   claims NAME and holds it; answers "free" or "held"
func TestChild(t *testing.T) {
	id := os.Getenv(childEnv)
	if id == "" {
		t.Skip("helper process of the multi-process tests")
	}
	s, err := Open(os.Getenv(childDirEnv), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		switch f[0] {
		case "race":
			body := []byte(fmt.Sprintf("child-%s-round-%s", id, f[1]))
			_, errCreate := s.Put(t.Context(), "create/"+f[1], body, ownership.IfAbsent())
			_, errMatch := s.Put(t.Context(), "match/"+f[1], body, ownership.IfMatch(ownership.ETag(f[2])))
			for _, err := range []error{errCreate, errMatch} {
				if o := ownership.OutcomeOf(err); o != ownership.Landed && o != ownership.Refused {
					fmt.Fprintf(os.Stderr, "round %s: %v\n", f[1], err)
				}
			}
			fmt.Printf("> %v %v\n", ownership.OutcomeOf(errCreate), ownership.OutcomeOf(errMatch))
		case "spam":
			// Writers that never stop: the parent kills this process.
			for w := range 8 {
				go func() {
					for i := 0; ; i++ {
						k := fmt.Sprintf("spam/%d/%d", w, i)
						etag, err := s.Put(context.Background(), k, bytes.Repeat([]byte{'s'}, 100+(i*997)%200000), ownership.IfAbsent())
						if err != nil {
							fmt.Fprintln(os.Stderr, err)
							return
						}
						fmt.Printf("> %s %s\n", k, etag)
					}
				}()
			}
			select {}
		case "claim":
			_, free, err := s.Claim(f[1])
			if err != nil {
				t.Fatal(err)
			}
			if free {
				fmt.Println("> free")
			} else {
				fmt.Println("> held")
			}
		}
		fmt.Println("> end")
	}
}
