package dirstore

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// The two-process race re-executes this test binary twice, each running
// only TestRaceChild, which this variable switches on.
const (
	childEnv    = "WASMKEEP_DIRSTORE_RACE_CHILD"
	childDirEnv = "WASMKEEP_DIRSTORE_RACE_DIR"
	// childETagsEnv names a directory with one file per round holding the
	// ETag both children race to replace.
	childETagsEnv = "WASMKEEP_DIRSTORE_RACE_ETAGS"
	raceRounds    = 150
)

// TestTwoProcessRace: two OS processes, each with its own Store on one
// directory, race a create-only write and an if-match write on the same
// keys, in lock-step rounds. Every round must have exactly one winner of
// each race, and the losers must be refused, not unknown.
func TestTwoProcessRace(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in a child process")
	}
	dir, etagDir := t.TempDir(), t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Each round's if-match race starts from an object whose ETag both
	// children are given, so both race on the same version.
	for r := range raceRounds {
		etag := mustPut(t, s, fmt.Sprintf("match/%d", r), "initial", ownership.IfAbsent())
		if err := os.WriteFile(etagDir+"/"+strconv.Itoa(r), []byte(etag), 0o666); err != nil {
			t.Fatal(err)
		}
	}

	type child struct {
		cmd    *exec.Cmd
		in     io.WriteCloser
		out    *bufio.Scanner
		stderr bytes.Buffer
	}
	var children [2]*child
	for i := range children {
		c := &child{cmd: exec.Command(os.Args[0], "-test.run=^TestRaceChild$", "-test.count=1")}
		c.cmd.Env = append(os.Environ(), childEnv+"="+strconv.Itoa(i), childDirEnv+"="+dir, childETagsEnv+"="+etagDir)
		c.cmd.Stderr = &c.stderr
		if c.in, err = c.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		stdout, err := c.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		c.out = bufio.NewScanner(stdout)
		if err := c.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		children[i] = c
	}
	defer func() {
		for _, c := range children {
			c.in.Close()
			if err := c.cmd.Wait(); err != nil {
				t.Errorf("child: %v\n%s", err, c.stderr.String())
			}
		}
	}()
	// result reads the child's answer for one round, skipping anything the
	// test framework prints.
	result := func(c *child, round int) []string {
		for c.out.Scan() {
			f := strings.Fields(c.out.Text())
			if len(f) == 4 && f[0] == "round" {
				if f[1] != strconv.Itoa(round) {
					t.Fatalf("child answered round %s, want %d", f[1], round)
				}
				return f[2:]
			}
		}
		t.Fatalf("child ended before round %d: %v\n%s", round, c.out.Err(), c.stderr.String())
		return nil
	}

	var wins [2]int
	for r := range raceRounds {
		// Alternate which child hears "go" first, so neither has a head
		// start in every round.
		for i := range children {
			if _, err := io.WriteString(children[(r+i)%2].in, "go\n"); err != nil {
				t.Fatal(err)
			}
		}
		var create, match [2]string
		for i, c := range children {
			res := result(c, r)
			create[i], match[i] = res[0], res[1]
		}
		for _, race := range []struct {
			name     string
			outcomes [2]string
			key      string
		}{
			{"create-only", create, fmt.Sprintf("create/%d", r)},
			{"if-match", match, fmt.Sprintf("match/%d", r)},
		} {
			winner := -1
			for i, o := range race.outcomes {
				if o == ownership.Landed.String() {
					winner = i
				}
			}
			o := race.outcomes
			if !(o[0] == "landed" && o[1] == "refused" || o[0] == "refused" && o[1] == "landed") {
				t.Fatalf("round %d, %s race: outcomes %q, want one landed and one refused", r, race.name, o)
			}
			wins[winner]++
			obj, err := s.Get(t.Context(), race.key)
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("child %d round %d", winner, r); string(obj.Body) != want {
				t.Fatalf("round %d, %s race: %q holds %q, want %q", r, race.name, race.key, obj.Body, want)
			}
		}
	}
	t.Logf("%d rounds of two races: child 0 won %d, child 1 won %d", raceRounds, wins[0], wins[1])
}

// TestRaceChild is one side of TestTwoProcessRace; it does nothing unless
// started by it. Each line "go" on stdin starts a round; it answers
// "round N <create outcome> <if-match outcome>" on stdout.
func TestRaceChild(t *testing.T) {
	id := os.Getenv(childEnv)
	if id == "" {
		t.Skip("helper process of TestTwoProcessRace")
	}
	s, err := Open(os.Getenv(childDirEnv))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	in := bufio.NewScanner(os.Stdin)
	for r := 0; in.Scan(); r++ {
		etag, err := os.ReadFile(os.Getenv(childETagsEnv) + "/" + strconv.Itoa(r))
		if err != nil {
			t.Fatal(err)
		}
		body := []byte(fmt.Sprintf("child %s round %d", id, r))
		_, errCreate := s.Put(t.Context(), fmt.Sprintf("create/%d", r), body, ownership.IfAbsent())
		_, errMatch := s.Put(t.Context(), fmt.Sprintf("match/%d", r), body, ownership.IfMatch(ownership.ETag(etag)))
		for _, err := range []error{errCreate, errMatch} {
			if o := ownership.OutcomeOf(err); o != ownership.Landed && o != ownership.Refused {
				fmt.Fprintf(os.Stderr, "round %d: %v\n", r, err)
			}
		}
		fmt.Printf("round %d %v %v\n", r, ownership.OutcomeOf(errCreate), ownership.OutcomeOf(errMatch))
	}
}
