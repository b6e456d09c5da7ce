package sqlitestore

import (
	"bufio"
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
	childEnv    = "WASMKEEP_SQLITESTORE_CHILD" // the child's id
	childDirEnv = "WASMKEEP_SQLITESTORE_DIR"
	raceRounds  = 100
)

func startChild(t *testing.T, id int, dir string) *storetest.Child {
	t.Helper()
	return storetest.StartChild(t, childEnv+"="+strconv.Itoa(id), childDirEnv+"="+dir)
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
	children := []*storetest.Child{startChild(t, 0, dir), startChild(t, 1, dir), startChild(t, 2, dir)}
	wins := make([]int, len(children))
	for r := range raceRounds {
		for i := range children {
			// Rotate which child hears "race" first.
			children[(r+i)%len(children)].Send(t, fmt.Sprintf("race %d %s", r, etags[r]))
		}
		outcomes := make([][2]string, len(children))
		for i, c := range children {
			a := c.Answer(t)
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
	storetest.KilledWriter(t, startChild(t, 0, dir), s, func() ownership.Bucket { return openDir(t, dir) })
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
	c.Send(t, "claim node/n1")
	if a := c.Answer(t); len(a) != 1 || a[0][0] != "free" {
		t.Fatalf("the child's claim: %q, want free", a)
	}
	if _, free, err := s.Claim("node/n1"); err != nil || free {
		t.Fatalf("claim held by a live process: free %v, %v; want held", free, err)
	}
	c.Kill()
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
			storetest.Race(t, s, id, f[1], f[2])
		case "spam":
			// Bodies of up to 200 KB: most are chunked.
			storetest.Spam(s, func(i int) int { return 100 + (i*997)%200000 })
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
