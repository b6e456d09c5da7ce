// Package procs starts and stops the `wasmkeep serve` processes of the
// cluster benchmarks (bench/failover, bench/drain, bench/relay), on
// 127.0.0.1 only, each stopped by its PID, also when a run fails (Fail).
package procs

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Node is one node process.
type Node struct {
	Name, Addr, Bucket, Log string
	// Admin, when set, is its --admin-listen address.
	Admin string
	// Bin is the wasmkeep binary; Extra more serve flags.
	Bin   string
	Extra []string
	cmd   *exec.Cmd
}

// started are the node processes Fail stops.
var started []*Node

// New returns node name on a fresh address, serving bucket, logging into
// dir/name.log; admin gives it an admin listener too.
func New(bin, dir, bucket, name string, admin bool, extra ...string) *Node {
	n := &Node{Name: name, Addr: Free(), Bucket: bucket, Log: filepath.Join(dir, name+".log"), Bin: bin, Extra: extra}
	if admin {
		n.Admin = Free()
	}
	started = append(started, n)
	return n
}

// Start starts the process and waits until /readyz says ready.
func (n *Node) Start() {
	f, err := os.OpenFile(n.Log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		Fail(err)
	}
	args := []string{"serve", "--node", n.Name, "--bucket", n.Bucket, "--listen", n.Addr, "--cache-dir", "", "--classes", ""}
	if n.Admin != "" {
		args = append(args, "--admin-listen", n.Admin)
	}
	n.cmd = exec.Command(n.Bin, append(args, n.Extra...)...)
	n.cmd.Stdout, n.cmd.Stderr = f, f
	if err := n.cmd.Start(); err != nil {
		Fail(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if res, err := http.Get("http://" + n.Addr + "/readyz"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	Fail(fmt.Errorf("%s did not get ready; see %s", n.Name, n.Log))
}

// Kill ends the process with SIGKILL and waits for it.
func (n *Node) Kill() {
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	_ = n.cmd.Wait()
}

// Stop ends the process with SIGTERM (SIGKILL 30 s on), if it runs.
func (n *Node) Stop() {
	if n.cmd == nil || n.cmd.Process == nil || n.cmd.ProcessState != nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = n.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = n.cmd.Process.Kill()
	}
}

// CPU is the process's user and system time so far, in seconds.
func (n *Node) CPU() float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n.cmd.Process.Pid))
	if err != nil {
		Fail(err)
	}
	fields := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+2:])
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100 // clock ticks of 10 ms
}

// Written is the bytes the process has handed to write calls so far
// (wchar of /proc/PID/io): its files' and its sockets' alike.
func (n *Node) Written() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", n.cmd.Process.Pid))
	if err != nil {
		Fail(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			w, _ := strconv.ParseInt(v, 10, 64)
			return w
		}
	}
	Fail(fmt.Errorf("no wchar in /proc/%d/io", n.cmd.Process.Pid))
	return 0
}

// RSS is the process's resident memory in bytes.
func (n *Node) RSS() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", n.cmd.Process.Pid))
	if err != nil {
		Fail(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	Fail(fmt.Errorf("no VmRSS in /proc/%d/status", n.cmd.Process.Pid))
	return 0
}

// workdirs are the directories StopAll removes.
var workdirs []string

// Workdir makes a temporary directory for a run, named after prefix, and
// returns it with the path of a directory bucket in it. StopAll removes
// it.
func Workdir(prefix string) (dir, bucket string) {
	dir, err := os.MkdirTemp("", "wasmkeep-"+prefix+"-")
	if err != nil {
		Fail(err)
	}
	workdirs = append(workdirs, dir)
	return dir, filepath.Join(dir, "bucket")
}

// StopAll stops every node New made and removes the run's directories.
func StopAll() {
	for _, n := range started {
		n.Stop()
	}
	for _, d := range workdirs {
		os.RemoveAll(d)
	}
}

// Free returns an address of 127.0.0.1 nothing listens on now.
func Free() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		Fail(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Fail stops every node and exits 1 with err.
func Fail(err error) {
	fmt.Fprintln(os.Stderr, filepath.Base(os.Args[0])+":", err)
	StopAll()
	os.Exit(1)
}

// Pair starts two nodes n1 and n2 on a fresh directory bucket of a run
// named prefix, each with extra flags, and waits until they have listed
// each other (a few lease periods). StopAll stops them.
func Pair(bin, prefix string, extra ...string) (n1, n2 *Node) {
	dir, bucket := Workdir(prefix)
	n1, n2 = New(bin, dir, bucket, "n1", false, extra...), New(bin, dir, bucket, "n2", false, extra...)
	n1.Start()
	n2.Start()
	time.Sleep(6 * time.Second)
	return n1, n2
}

// Median is the middle of vs (the upper one of an even count); vs is
// sorted in place.
func Median(vs []float64) float64 {
	slices.Sort(vs)
	return vs[len(vs)/2]
}
