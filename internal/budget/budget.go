// Package budget divides what a node process may hold among the parts that
// clients can make it spend: file descriptors (the process's file limit)
// and memory (for request bodies in flight).
//
// The descriptor budget is what keeps a flood of client connections from
// starving the node's own files. The process's file limit is divided at
// start into
//
//   - a reserve that clients can never take: the bucket's files and
//     connections, the lease, connections to peers, compiled classes;
//   - the WebSockets the node holds open (each is one descriptor, and
//     outlives its actor's hibernation);
//   - plain HTTP connections (keep-alive included), admitted as usual;
//   - an overflow band past those: connections admitted only to answer
//     /healthz, /readyz and peer requests, and to refuse anything else
//     with a 503 before closing.
//
// A connection past the overflow band is closed as soon as it is accepted.
package budget

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Descriptors is the division of a file limit.
type Descriptors struct {
	// Limit is the process's file limit (RLIMIT_NOFILE, soft).
	Limit int
	// Reserve is kept for the node's own files and connections.
	Reserve int
	// Sockets bounds the WebSockets open at once.
	Sockets int
	// Conns bounds the HTTP connections served as usual.
	Conns int
	// Overflow is how many connections past Conns are admitted to answer
	// health checks and peers, and to refuse the rest with a 503.
	Overflow int
}

// MinLimit is the smallest file limit a node starts with: below it the
// reserve and a useful number of connections do not fit.
const MinLimit = 256

// Divide divides limit with the default shares: a sixteenth (at least 64)
// for the reserve, a sixty-fourth (at least 16) for the overflow band, and
// of the rest a quarter for HTTP connections and three quarters for
// WebSockets (which live long, and of which a node holds many).
func Divide(limit int) (Descriptors, error) {
	if limit < MinLimit {
		return Descriptors{}, fmt.Errorf("file limit %d is under %d: raise it (ulimit -n)", limit, MinLimit)
	}
	d := Descriptors{Limit: limit, Reserve: max(64, limit/16), Overflow: max(16, limit/64)}
	rest := limit - d.Reserve - d.Overflow
	d.Conns = rest / 4
	d.Sockets = rest - d.Conns
	return d, nil
}

// Fit sets the explicit bounds the operator gave (zero: not given) and
// checks that everything fits under the limit. A given bound that does
// not fit is an error with the numbers; one not given keeps its default
// share, shrunk if the other was given larger than its share.
func (d Descriptors) Fit(sockets, conns int) (Descriptors, error) {
	room := d.Limit - d.Reserve - d.Overflow
	switch {
	case sockets < 0 || conns < 0:
		return d, errors.New("a bound is negative")
	case sockets > 0 && conns > 0 && sockets+conns > room:
		return d, fmt.Errorf("--max-sockets %d and --max-conns %d add up to %d, over the %d descriptors the file limit %d leaves (%d reserved for the bucket, the lease and peers, %d for health checks and refusals): lower them or raise the limit (ulimit -n)",
			sockets, conns, sockets+conns, room, d.Limit, d.Reserve, d.Overflow)
	case sockets > room-1:
		return d, fmt.Errorf("--max-sockets %d is over the %d descriptors the file limit %d leaves for WebSockets and HTTP connections (%d reserved for the bucket, the lease and peers, %d for health checks and refusals): lower it or raise the limit (ulimit -n)",
			sockets, room-1, d.Limit, d.Reserve, d.Overflow)
	case conns > room-1:
		return d, fmt.Errorf("--max-conns %d is over the %d descriptors the file limit %d leaves for WebSockets and HTTP connections (%d reserved for the bucket, the lease and peers, %d for health checks and refusals): lower it or raise the limit (ulimit -n)",
			conns, room-1, d.Limit, d.Reserve, d.Overflow)
	}
	switch {
	case sockets > 0 && conns > 0:
		d.Sockets, d.Conns = sockets, conns
	case sockets > 0:
		d.Sockets, d.Conns = sockets, min(d.Conns, room-sockets)
	case conns > 0:
		d.Conns, d.Sockets = conns, min(d.Sockets, room-conns)
	}
	return d, nil
}

// Memory is the memory the process may use: the cgroup's limit where one
// is set (Linux, cgroup v2 or v1), else the machine's memory. Zero: not
// known here.
func Memory() int64 {
	var limit int64
	for _, path := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && n < 1<<50 {
			limit = n
			break
		}
	}
	total := memTotal()
	if limit > 0 && (total == 0 || limit < total) {
		return limit
	}
	return total
}

// memTotal reads MemTotal from /proc/meminfo; zero where it cannot.
func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if err != nil {
			return 0
		}
		return kb << 10
	}
	return 0
}

// Bodies is the default bound on the request bodies a node holds in memory
// at once: a sixty-fourth of mem, between 16 MiB and 256 MiB (64 MiB where
// mem is not known). What a body costs the process is more than its bytes
// (a buffer grows by doubling, the old one is garbage until the next
// collection): 1,000 stalled bodies of 1 MiB under a bound of 1 GiB held
// 1.4 to 2 GB, so the bound leaves room for that on a small machine.
func Bodies(mem int64) int64 {
	if mem <= 0 {
		return 64 << 20
	}
	return min(max(mem/64, 16<<20), 256<<20)
}
