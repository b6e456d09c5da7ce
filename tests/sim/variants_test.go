package sim

import (
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// A variant is a deliberately broken rule of the ownership core. Each is a
// textual patch on one file of the core, applied into a copy that replaces
// the file through `go test -overlay`: production code carries no switch.
// A patch that no longer applies fails the test, so variants cannot rot.
type variant struct {
	name   string
	file   string // in ownership/
	old    string
	new    string
	budget int // seeds within which the suite must catch it
	// params names the parameters its seeds run (paramsByName): Default
	// when empty.
	params string
}

var variants = []variant{
	{
		name: "readopt-on-wake", file: "park.go", budget: 200,
		old: `	if e.live != nil {
		c.emit(Grant{Actor: in.Actor, Ref: in.Ref, Gen: e.live.gen})
		return
	}`,
		new: `	if e.live != nil {
		c.emit(Grant{Actor: in.Actor, Ref: in.Ref, Gen: e.live.gen})
		return
	}
	if e.parked != nil { // broken: a wake re-adopts the parked hold without writing
		h := *e.parked
		c.dropParked(e)
		e.live = &h
		c.emit(Grant{Actor: in.Actor, Ref: in.Ref, Gen: h.gen})
		return
	}`,
	},
	{
		name: "lapse-forgets-parked", file: "lapse.go", budget: 300,
		old: `		c.releaseParked(e, "lapse")`,
		new: `		c.dropParked(e) // broken: a lapse forgets parked records`,
	},
	{
		name: "release-on-hibernation", file: "park.go", budget: 200,
		old: `	if e.sockets > 0 && c.LeaseValid(c.now) && c.serving() && e.moving == nil {`,
		new: `	if false { // broken: hibernation releases even with sockets open`,
	},
	{
		name: "resolver-parked-any-generation", file: "resolver.go", budget: 1000,
		old: `(e.parked != nil && e.parked.gen == u.gen)`,
		new: `(e.parked != nil) /* broken: a parked hold counts at any generation */`,
	},
	{
		name: "unknown-wake-drops-parked", file: "park.go", budget: 2000,
		old: `		// A wake's parked entry stays: if the write did not land, the record
		// still names the parked hold, which only that entry can release.`,
		new: `		if f.wake {
			c.dropParked(e) // broken: a wake with an unknown outcome drops the parked hold
		}`,
	},
	{
		name: "resolver-ends-unchanged", file: "resolver.go", budget: 2500,
		old: `		if c.now.Sub(u.since) < c.cfg.ResolverWatch {`,
		new: `		if false { // broken: the first read of an unchanged record ends the entry`,
	},
	{
		// The record is written before the state is sealed: a commit of the
		// previous hold whose answer was lost can land after the new record,
		// before the new hold's first event seals the state.
		name: "no-seal", file: "holds.go", budget: 600,
		old: `	c.seal(e, gen, prior, e.parked != nil)`,
		new: `	c.writeRecord(e, gen, prior, e.parked != nil) // broken: no seal`,
	},
	{
		// A sweep deletes unlisted runs of any generation: a superseded
		// hold's sweep deletes the run a later hold's head names.
		name: "sweep-any-generation", file: "state.go", budget: 600,
		old: `	return !listed && runGen < gen`,
		new: `	return !listed // broken: whatever generation wrote it`,
	},
	{
		// A sweep deletes the hold's own unlisted runs too: one being
		// written, whose head lands naming a run that is gone.
		name: "sweep-own-generation", file: "state.go", budget: 600,
		old: `	return !listed && runGen < gen`,
		new: `	return !listed && runGen <= gen // broken: its own runs too`,
	},
	{
		// The output gate refuses an event whose commit landed once its
		// hold may no longer act: the event took effect, and its client,
		// told to retry, makes it take effect twice.
		name: "refuse-after-landed-commit", file: "gate.go", budget: 200,
		old: `	case e.Commit == Landed && (e.Wrote || e.Earlier):`,
		new: `	case e.Commit == Landed && (e.Wrote || e.Earlier) && e.MayAct(): // broken: refused once the hold ended`,
	},
	{
		// A commit without an answer is taken for landed when the object
		// read again has its header (generation and write count): a seal
		// of an acquisition that lost its race, stamped the same, passes
		// for it, and the event's acknowledged write is lost.
		name: "lost-commit-judged-by-header", file: "state.go", budget: 1500,
		old: `	case found && bytes.Equal(read, sent):`,
		new: `	case found && func() bool { a, _, e1 := DecodeState(read); b, _, e2 := DecodeState(sent); return e1 == nil && e2 == nil && a == b }(): // broken: the header alone`,
	},
	{
		// The poller deletes an alarm's index entry once the delivery's
		// event ran, durable or not: a firing whose commit did not land
		// leaves the alarm in the state with no entry.
		name: "alarm-entry-deleted-before-durable", file: "alarm.go", budget: 100,
		old: `	case AlarmFire, AlarmGone:
		return durable`,
		new: `	case AlarmFire, AlarmGone:
		return true // broken: once the event ran, durable or not`,
	},
	{
		// The event that fires an alarm leaves its record: its entry goes
		// once the event is durable, and the alarm stays with none (or,
		// delivered again first, fires twice).
		name: "alarm-kept-after-firing", file: "alarm.go", budget: 100,
		old: `	return present && cur.Nonce == fired`,
		new: `	return false // broken: the record is the handler's to delete`,
	},
	{
		// A hold reads its state again as any read after a commit of its
		// own had no known outcome: an alarm that commit sets is found
		// gone, its entry deleted, and the commit lands after. Rare by
		// default; AlarmHeavy's seeds meet it about once in a hundred.
		name: "reload-without-fence", file: "state.go", budget: 1000, params: "alarm-heavy",
		old: `	v, h := JudgeState(found, read, gen)
	if !pending {`,
		new: `	v, h := JudgeState(found, read, gen)
	if true { // broken: a reload reads as any read`,
	},
}

var (
	flagVariantRun = flag.Bool("variant-run", false, "internal: run seeds and report detections, never fail (used by TestVariants)")
	flagVariants   = flag.String("variants", "", "run only the variants whose names match this regexp")
	flagBudget     = flag.Int("budget", 0, "override every variant's seed budget")
)

// detection is what a variant run reports.
type detection struct {
	Seeds    int    `json:"seeds"`
	Failed   int    `json:"failed"`
	First    int64  `json:"first"` // -1: none
	FirstMsg string `json:"first_msg"`
}

// TestVariantRun is the child side of TestVariants: it runs a budget of
// seeds on the (overlaid) core and reports what the checks caught.
func TestVariantRun(t *testing.T) {
	if !*flagVariantRun {
		t.Skip("run by TestVariants on an overlaid core")
	}
	failures := runSeeds(params(), *flagFirst, *flagSeeds, nil)
	d := detection{Seeds: *flagSeeds, Failed: len(failures), First: -1}
	for seed := *flagFirst; seed < *flagFirst+uint64(*flagSeeds); seed++ {
		if f, ok := failures[seed]; ok {
			d.First, d.FirstMsg = int64(seed), f
			break
		}
	}
	out, _ := json.Marshal(d)
	fmt.Printf("DETECTION %s\n", out)
}

// TestVariants builds the simulation once per broken variant and fails if
// any variant is not caught within its seed budget.
func TestVariants(t *testing.T) {
	if *flagVariantRun {
		t.Skip("child run")
	}
	filter := regexp.MustCompile(*flagVariants)
	root := repoRoot(t)
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	for _, v := range variants {
		if !filter.MatchString(v.name) {
			continue
		}
		t.Run(v.name, func(t *testing.T) {
			dir := t.TempDir()
			orig := filepath.Join(root, "ownership", v.file)
			src, err := os.ReadFile(orig)
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(string(src), v.old); n != 1 {
				t.Fatalf("variant %s no longer applies: its patch matches %d places in ownership/%s", v.name, n, v.file)
			}
			patched := filepath.Join(dir, v.file)
			if err := os.WriteFile(patched, []byte(strings.Replace(string(src), v.old, v.new, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			overlay, _ := json.Marshal(map[string]map[string]string{"Replace": {orig: patched}})
			overlayFile := filepath.Join(dir, "overlay.json")
			if err := os.WriteFile(overlayFile, overlay, 0o644); err != nil {
				t.Fatal(err)
			}
			bin := filepath.Join(dir, "sim.test")
			build := exec.Command(goBin, "test", "-c", "-overlay", overlayFile, "-o", bin, "./tests/sim")
			build.Dir = root
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("build with variant %s: %v\n%s", v.name, err, out)
			}
			budget := v.budget
			if *flagBudget > 0 {
				budget = *flagBudget
			}
			run := exec.Command(bin, "-test.run", "^TestVariantRun$", "-variant-run", "-seeds", strconv.Itoa(budget), "-params", cmp.Or(v.params, "default"))
			out, err := run.CombinedOutput()
			if err != nil {
				t.Fatalf("variant %s run: %v\n%s", v.name, err, out)
			}
			var d detection
			for _, line := range strings.Split(string(out), "\n") {
				if j, ok := strings.CutPrefix(line, "DETECTION "); ok {
					if err := json.Unmarshal([]byte(j), &d); err != nil {
						t.Fatal(err)
					}
				}
			}
			if d.Seeds == 0 {
				t.Fatalf("variant %s reported nothing:\n%s", v.name, out)
			}
			if d.Failed == 0 {
				t.Errorf("variant %s NOT CAUGHT in %d seeds", v.name, d.Seeds)
				return
			}
			t.Logf("variant %-32s caught in %4d of %4d seeds (%.1f%%), first at seed %d: %s",
				v.name, d.Failed, d.Seeds, 100*float64(d.Failed)/float64(d.Seeds), d.First, firstLine(d.FirstMsg))
		})
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func repoRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test directory")
		}
		dir = parent
	}
}
