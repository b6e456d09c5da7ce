package wasmhost

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/ownership"
)

// Modules known to compile. Compiling a class (Compile: its
// instrumentation, wazero's decoding and validation, its code from the
// compilation cache, a guest started to ask its ABI version) is most of a
// node's start: about 45 ms of CPU for each Go guest. What it checks
// depends on the module's bytes, on the runtime's limits, and on the code
// that checks: the ABI the host offers (ABIVersion), the checks of Compile
// and the instrumentation (checkRevision), and wazero (its version). Once
// a module has passed, Compile keeps a record of it in the cache directory
// (known/<key>), and a later start, of this build or another with the same
// three, may serve before it compiles the module again
// (CompileInBackground): its events wait for that compile, and the node's
// other classes are served at once. A module without such a record is
// compiled, and refused, before the node serves.

// checkRevision names the checks of Compile and the instrumentation (meter.go)
// as they stand: raise it with any change to what Compile accepts or to
// the code it instruments, so that a node records the modules it has
// checked under a key of its own.
const checkRevision = 1

// knownKey is the record's name for wasm under r: the module's checksums
// and length, and what its check depends on besides (see above). "" when
// there is no cache directory, or the checker cannot be named.
func (r *Runtime) knownKey(wasm []byte) string {
	checker := checkerIdentity()
	if r.cfg.CacheDir == "" || checker == "" {
		return ""
	}
	// Two CRC-32s (both done by the CPU) rather than a cryptographic
	// hash, which would cost a start 5 ms for the examples' 4 MB: the
	// record decides only when a module is checked, never whether (no
	// event of a class runs before its compile has checked it), so a
	// collision could only move a failed check after the start.
	return fmt.Sprintf("%08x%08x-%d-abi%d-check%d-wazero%s-mem%d", crc32.Checksum(wasm, castagnoli), crc32.ChecksumIEEE(wasm), len(wasm),
		ABIVersion, checkRevision, checker, r.cfg.MemoryLimit)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checkerIdentity is wazero's version as built into this binary, or, when
// the binary carries no module information, the binary itself (its size
// and time: every build differs).
var checkerIdentity = sync.OnceValue(func() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/tetratelabs/wazero" {
				if d.Replace != nil {
					d = d.Replace
				}
				return strings.NewReplacer("/", "_", " ", "_").Replace(d.Version)
			}
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	fi, err := os.Stat(exe)
	if err != nil {
		return ""
	}
	return "exe" + strconv.FormatInt(fi.Size(), 10) + "-" + strconv.FormatInt(fi.ModTime().UnixNano(), 10)
})

func (r *Runtime) knownPath(key string) string { return filepath.Join(r.cfg.CacheDir, "known", key) }

// Known says whether wasm passed Compile on an earlier start whose checks
// were these, with these limits (see the comment at the top of this file).
func (r *Runtime) Known(wasm []byte) bool {
	key := r.knownKey(wasm)
	if key == "" {
		return false
	}
	_, err := os.Stat(r.knownPath(key))
	return err == nil
}

// markKnown records that wasm passed Compile. A record that cannot be
// written costs the next start its compile, nothing else.
func (r *Runtime) markKnown(wasm []byte) {
	key := r.knownKey(wasm)
	if key == "" {
		return
	}
	p := r.knownPath(key)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
		_ = os.WriteFile(p, nil, 0o644)
	}
}

// forget drops wasm's record: it failed to compile after all.
func (r *Runtime) forget(wasm []byte) {
	if key := r.knownKey(wasm); key != "" {
		_ = os.Remove(r.knownPath(key))
	}
}

// Pending is a class whose module compiles in the background
// (CompileInBackground): a ResidentClass at once, whose events wait for
// the compile and then run as the module's.
type Pending struct {
	class string
	done  chan struct{}
	mod   *Module
	err   error
}

// CompileInBackground compiles wasm as class as Compile does, in the
// background, and returns the class at once (a compile the runtime's Close
// cut short ends with ErrClosed, and leaves the record as it was). Use it for a module Known
// says passed before; ready, when set, is called once the compile is done,
// with the module or why it failed (the record is then dropped, so that
// the next start compiles it before it serves, and refuses it).
func (r *Runtime) CompileInBackground(class string, wasm []byte, ready func(*Module, error)) *Pending {
	p := &Pending{class: class, done: make(chan struct{})}
	finish := func(m *Module, err error) {
		p.mod, p.err = m, err
		close(p.done)
		if err != nil && !errors.Is(err, ErrClosed) {
			r.forget(wasm)
		}
		if ready != nil {
			ready(m, err)
		}
	}
	closed := func() { finish(nil, fmt.Errorf("compile class %q: %w", class, ErrClosed)) }
	started := r.goBackground(func(ctx context.Context) {
		// After the node serves (Serving), one such compile at a time,
		// leaving the other cores to the node's start and its events.
		select {
		case <-r.serving:
		case <-ctx.Done():
			closed()
			return
		}
		select {
		case backgroundCompiles <- struct{}{}:
		case <-ctx.Done():
			closed()
			return
		}
		m, err := r.Compile(ctx, class, wasm)
		<-backgroundCompiles
		if err != nil && ctx.Err() != nil {
			closed() // the node stopped first: the module is as known as it was
			return
		}
		finish(m, err)
	})
	if !started {
		closed()
	}
	return p
}

// Serving says the node serves: the compiles of CompileInBackground begin
// (until then they would take the CPU its start needs). Calling it again
// does nothing.
func (r *Runtime) Serving() { r.servingOnce.Do(func() { close(r.serving) }) }

// backgroundCompiles bounds the compiles of CompileInBackground under way.
var backgroundCompiles = make(chan struct{}, 1)

// ErrNotCompiled is wrapped by the errors of events of a Pending class
// whose compile failed.
var ErrNotCompiled = errors.New("wasm class not compiled")

// Module waits for the compile and returns the module, or why there is
// none.
func (p *Pending) Module(ctx context.Context) (*Module, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		return nil, fmt.Errorf("wasm class %q still compiling: %w", p.class, ctx.Err())
	}
	if p.err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotCompiled, p.err)
	}
	return p.mod, nil
}

// Handle runs an event on the module once compiled (the host calls it
// only for a class that is not a ResidentClass, which Pending is).
func (p *Pending) Handle(ctx context.Context, req *actors.Request, st actors.Storage) (*actors.Response, error) {
	m, err := p.Module(ctx)
	if err != nil {
		return nil, err
	}
	return m.Handle(ctx, req, st)
}

// NewResident returns the actor's resident object, which takes the
// module's at its first event.
func (p *Pending) NewResident(a ownership.Actor) actors.Resident {
	return &pendingResident{p: p, a: a}
}

// pendingResident is a resident actor of a Pending class.
type pendingResident struct {
	p   *Pending
	a   ownership.Actor
	res actors.Resident // the module's, from the first event on
}

func (pr *pendingResident) resident(ctx context.Context) (actors.Resident, error) {
	if pr.res == nil {
		m, err := pr.p.Module(ctx)
		if err != nil {
			return nil, err
		}
		pr.res = m.NewResident(pr.a)
	}
	return pr.res, nil
}

func (pr *pendingResident) Handle(ctx context.Context, req *actors.Request, st actors.Storage) (*actors.Response, error) {
	res, err := pr.resident(ctx)
	if err != nil {
		return nil, err
	}
	return res.Handle(ctx, req, st)
}

func (pr *pendingResident) HandleSocket(ctx context.Context, ev *actors.SocketEvent, st actors.Storage) error {
	res, err := pr.resident(ctx)
	if err != nil {
		return err
	}
	if h, ok := res.(actors.SocketHandler); ok {
		return h.HandleSocket(ctx, ev, st)
	}
	return nil
}

func (pr *pendingResident) HandleAlarm(ctx context.Context, a actors.Alarm, st actors.Storage) error {
	res, err := pr.resident(ctx)
	if err != nil {
		return err
	}
	if h, ok := res.(actors.AlarmHandler); ok {
		return h.HandleAlarm(ctx, a, st)
	}
	return actors.ErrAlarmsNotHandled
}

func (pr *pendingResident) Close() {
	if pr.res != nil {
		pr.res.Close()
	}
}

var (
	_ actors.ResidentClass = (*Pending)(nil)
	_ actors.SocketHandler = (*pendingResident)(nil)
)
