// Package storetest is what the tests of the embedded stores
// (ownership/dirstore, ownership/sqlitestore) share: other processes with
// a Store of their own on the same directory, and the store's lock held
// as another process holds it. Only tests import it.
//
// A multi-process test re-executes its own test binary, each child
// running only the package's TestChild, which environment variables of
// the package's own switch on and steer. A child reads one command per
// line on stdin and answers each with lines on stdout that start with
// "> ", the last of which is "> end".
package storetest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Child is a running TestChild.
type Child struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr bytes.Buffer
	killed bool
}

// StartChild starts the test binary again, running only TestChild, with
// env added to its environment. When the test ends, the child's stdin is
// closed, and a child that then fails, unless Kill ended it, fails the
// test.
func StartChild(t *testing.T, env ...string) *Child {
	t.Helper()
	c := &Child{cmd: exec.Command(os.Args[0], "-test.run=^TestChild$", "-test.count=1")}
	c.cmd.Env = append(os.Environ(), env...)
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
		if c.killed {
			return
		}
		c.in.Close()
		if err := c.cmd.Wait(); err != nil {
			t.Errorf("child %v: %v\n%s", env, err, c.stderr.String())
		}
	})
	return c
}

// Send sends the child one command.
func (c *Child) Send(t *testing.T, cmd string) {
	t.Helper()
	if _, err := io.WriteString(c.in, cmd+"\n"); err != nil {
		t.Fatal(err)
	}
}

// Answer reads the child's answer to one command, each line split into
// fields, skipping anything the test framework prints.
func (c *Child) Answer(t *testing.T) [][]string {
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

// Kill kills the child (SIGKILL) and waits for it to end.
func (c *Child) Kill() {
	c.killed = true
	c.cmd.Process.Kill()
	c.cmd.Wait()
}

// Race is a child's answer to "race R ETAG": a create-only put of
// create/R, then an if-match ETAG put of match/R, each of the body
// "child-ID-round-R"; it answers their outcomes, "> <outcome> <outcome>".
// An outcome other than landed or refused is told on stderr too.
func Race(t *testing.T, b ownership.Bucket, id, round, etag string) {
	body := []byte(fmt.Sprintf("child-%s-round-%s", id, round))
	_, errCreate := b.Put(t.Context(), "create/"+round, body, ownership.IfAbsent())
	_, errMatch := b.Put(t.Context(), "match/"+round, body, ownership.IfMatch(ownership.ETag(etag)))
	for _, err := range []error{errCreate, errMatch} {
		if o := ownership.OutcomeOf(err); o != ownership.Landed && o != ownership.Refused {
			fmt.Fprintf(os.Stderr, "round %s: %v\n", round, err)
		}
	}
	fmt.Printf("> %v %v\n", ownership.OutcomeOf(errCreate), ownership.OutcomeOf(errMatch))
}

// Spam is a child's answer to "spam": eight goroutines put new keys, the
// i-th of each a body of size(i) bytes, and answer "> KEY ETAG" for each
// acknowledged write, until the parent kills the child. It never returns.
func Spam(b ownership.Bucket, size func(i int) int) {
	for w := range 8 {
		go func() {
			for i := 0; ; i++ {
				k := fmt.Sprintf("spam/%d/%d", w, i)
				etag, err := b.Put(context.Background(), k, bytes.Repeat([]byte{'s'}, size(i)), ownership.IfAbsent())
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					return
				}
				fmt.Printf("> %s %s\n", k, etag)
			}
		}()
	}
	select {}
}

// KilledWriter has c spam (see Spam), kills it once it has acknowledged
// 300 writes, and checks that every write it acknowledged is there: in
// b, a Store open all along, which then writes on past whatever the
// killed process left half written, and in the Store reopen opens after.
func KilledWriter(t *testing.T, c *Child, b ownership.Bucket, reopen func() ownership.Bucket) {
	t.Helper()
	c.Send(t, "spam")
	acked := map[string]ownership.ETag{}
	for len(acked) < 300 && c.out.Scan() {
		if f := strings.Fields(strings.TrimPrefix(c.out.Text(), "> ")); len(f) == 2 {
			acked[f[0]] = ownership.ETag(f[1])
		}
	}
	c.Kill()
	if len(acked) < 300 {
		t.Fatalf("the child acknowledged only %d writes", len(acked))
	}
	check := func(b ownership.Bucket) {
		t.Helper()
		for k, etag := range acked {
			obj, err := b.Get(t.Context(), k)
			if err != nil || obj.ETag != etag {
				t.Fatalf("get %q: %s, %v; want the acknowledged write %s", k, obj.ETag, err, etag)
			}
		}
	}
	check(b)
	if _, err := b.Put(t.Context(), "after", []byte("a"), ownership.IfAbsent()); err != nil {
		t.Fatalf("put after the kill: %v", err)
	}
	check(reopen())
}
