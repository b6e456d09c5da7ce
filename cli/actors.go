package cli

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/ingress"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/internal/actorstore"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/cluster"
)

func actorsCommands() *command {
	return &command{
		name:    "actors",
		summary: "look inside actors through the bucket, with no node running: list, read, query, export, import",
		detail: "Every command reads the bucket directly, as a node would, and needs no node: a directory bucket\n" +
			"may be read while nodes run on it. list, get, sql and export only read: what they show is the\n" +
			"version of an actor's storage its state object held when they read it. import writes, and only\n" +
			"into an actor no node holds.",
		subs: []*command{
			{
				name:    "list",
				args:    "CLASS",
				summary: "list the actors of a class: size, objects, who holds each",
				detail: "Lists actors/CLASS/ (state objects and runs, with their sizes) and owners/CLASS/ (ownership\n" +
					"records), a LIST request per 1,000 keys, and prints one line per actor: its name, the bytes\n" +
					"and count of its objects in the bucket (state object plus runs, old runs not yet deleted\n" +
					"included), and what its record says: held (by a live node: resident there, or parked\n" +
					"beside its sockets, which the bucket cannot tell apart), ended (by a process that has\n" +
					"ended: any node may acquire it), free (released; NODE is its last holder, in brackets) or\n" +
					"none (never held). The records are read one GET each, 16 at a time (--readers), and the\n" +
					"leases once; --records=false skips them. No store keeps the time of a write (a directory\n" +
					"or SQLite bucket keeps none), so the last write is told by the state object's header:\n" +
					"--writes reads it (a ranged GET of 64 bytes per actor) for the generation of the hold that\n" +
					"last wrote or sealed it and its count of writes. Actors' states are never read.\n" +
					"Cost for 10,000 actors (bench/actorlist, bench/RESULTS.md): 22 LISTs and 10,001 GETs (the\n" +
					"records and the lease); 33 ms on a directory bucket, 5.0 s on versitygw over loopback.\n" +
					"--records=false: 21 LISTs, 15 ms and 1.1 s. --writes: 10,000 ranged GETs more, 55 ms and 7.8 s.",
				setup: setupActorsList,
			},
			{
				name:    "get",
				args:    "CLASS/NAME [KEY]",
				summary: "print an actor's keys and values, or one key's value",
				detail: "Reads the actor's state object and the runs it lists, as a node loads them, and prints every\n" +
					"key with its value (--prefix: those that begin with P), or the value of KEY. Values are\n" +
					"printed as they are when they are printable UTF-8, quoted with Go escapes when they are UTF-8\n" +
					"with control characters (or begin with a quote or 0x), and as 0x and hexadecimal otherwise;\n" +
					"in a listing, past --width characters they are cut (--width 0: never). --raw writes KEY's\n" +
					"value as it is. The node's own keys, under the byte 0x00 (the pages of the actor's SQL\n" +
					"database, the event keys it remembers), are shown only with --all. Only reads.",
				setup: setupActorsGet,
			},
			{
				name:    "sql",
				args:    "CLASS/NAME QUERY",
				summary: "run a read-only SQL query on an actor's database",
				detail: "Opens the actor's SQL database read-only over the pages its storage holds (read into memory)\n" +
					"and runs QUERY, one statement, printing its rows as aligned columns (--tsv: tab-separated,\n" +
					"--json: one object). A statement that would write is refused before it runs: the database\n" +
					"is a snapshot read from the bucket without a hold, and only the actor's class writes it, in\n" +
					"its events. So are ATTACH, transactions and the PRAGMAs that set. NULL is printed NULL and a\n" +
					"blob as x'hexadecimal'.",
				setup: setupActorsSQL,
			},
			{
				name:    "export",
				args:    "CLASS/NAME",
				summary: "write one actor's whole storage to a file, with a checksum",
				detail: "Writes the actor's whole storage, the node's keys included (its SQL database, the event keys\n" +
					"it remembers), as one consistent version, to standard output or --output FILE (written\n" +
					"whole, then renamed), in the export format of docs/OPERATING.md: a versioned header, the\n" +
					"entries in key order, their count and bytes, and a SHA-256 of the file. A summary goes to\n" +
					"standard error. Only reads; a node may serve the actor meanwhile.",
				setup: setupActorsExport,
			},
			{
				name:    "import",
				args:    "CLASS/NAME FILE",
				summary: "replace an actor's storage with an export, if no node holds it",
				detail: "Checks FILE whole (format, order, counts, SHA-256), then reads the actor's state object's\n" +
					"version, then its ownership record: a node that holds the actor, resident or parked, is\n" +
					"refused (the error names it and says what to do). Then writes the entries as a commit does,\n" +
					"runs first, and the state object conditioned on the version read: a node that acquires the\n" +
					"actor meanwhile seals the state object first, and the import is then refused rather than\n" +
					"lost. The actor's storage is replaced whole; its old runs are deleted. The export may come\n" +
					"from another actor (a copy) or the same (a restore). --replace-damaged replaces a state\n" +
					"object that does not decode.",
				setup: setupActorsImport,
			},
		},
	}
}

// actorsFlags are the flags every actors command has.
type actorsFlags struct {
	BucketURL string
	Timeout   time.Duration
}

func (f *actorsFlags) register(fs *flag.FlagSet, timeout time.Duration) {
	f.BucketURL, f.Timeout = defaultBucketURL, timeout
	fs.StringVar(&f.BucketURL, "bucket", f.BucketURL, bucketURLHelp)
	fs.DurationVar(&f.Timeout, "timeout", f.Timeout, "bound on the whole command")
}

func (f actorsFlags) Validate() error { return validateClusterFlags(f.BucketURL, f.Timeout) }

// parseActor reads CLASS/NAME.
func parseActor(arg string) (ownership.Actor, error) {
	class, name, ok := strings.Cut(arg, "/")
	if !ok || class == "" || name == "" {
		return ownership.Actor{}, fmt.Errorf("want CLASS/NAME, got %q", arg)
	}
	if err := ingress.ValidClassName(class); err != nil {
		return ownership.Actor{}, err
	}
	if !utf8.ValidString(name) || strings.IndexFunc(name, unicode.IsControl) >= 0 {
		return ownership.Actor{}, fmt.Errorf("name %q: not UTF-8, or holds a control character", name)
	}
	a := ownership.Actor{Class: class, Name: name}
	return a, ownership.ValidateActor(a)
}

// errNoActor says the bucket has nothing of an actor.
func errNoActor(a ownership.Actor) error {
	return fmt.Errorf("no actor %s/%s in the bucket", a.Class, a.Name)
}

// snapshotTries bounds the reads of an actor whose state changes while
// it is read (a node merging its runs).
const snapshotTries = 5

// withSnapshot reads actor a and runs f on it, reading it again when a
// node changed it meanwhile. An actor with no state object and no record
// is errNoActor; one with a record and no state object is an empty
// storage.
func withSnapshot(ctx context.Context, b ownership.Bucket, a ownership.Actor, f func(*actorstore.Snapshot) error) error {
	var err error
	for range snapshotTries {
		var s *actorstore.Snapshot
		if s, err = actorstore.ReadActor(ctx, b, a); err != nil {
			if errors.Is(err, actorstore.ErrStateChanged) {
				continue
			}
			return err
		}
		if !s.Exists() {
			h, err := cluster.ReadHolder(ctx, b, a)
			if err != nil {
				return err
			}
			if h.State == cluster.RecordNone {
				return errNoActor(a)
			}
		}
		if err = f(s); !errors.Is(err, actorstore.ErrStateChanged) {
			return err
		}
	}
	return fmt.Errorf("%w, %d times: a node writes it too fast to read it whole; try again", err, snapshotTries)
}

// actorsListConfig is what `wasmkeep actors list` runs with.
type actorsListConfig struct {
	actorsFlags
	Class   string
	JSON    bool
	Records bool
	Writes  bool
	Readers int
}

func (c actorsListConfig) Validate() error {
	var errs []error
	if err := ingress.ValidClassName(c.Class); err != nil {
		errs = append(errs, err)
	}
	if c.Readers < 1 {
		errs = append(errs, fmt.Errorf("--readers %d: want at least 1", c.Readers))
	}
	return errors.Join(append(errs, c.actorsFlags.Validate())...)
}

func setupActorsList(fs *flag.FlagSet) action {
	cfg := actorsListConfig{Records: true, Readers: 16}
	cfg.register(fs, time.Minute)
	fs.BoolVar(&cfg.JSON, "json", false, "print the list as one JSON object")
	fs.BoolVar(&cfg.Records, "records", cfg.Records, "read each actor's ownership record, for who holds it (one GET each)")
	fs.BoolVar(&cfg.Writes, "writes", false, "read each state object's header, for its generation and count of writes (one ranged GET each)")
	fs.IntVar(&cfg.Readers, "readers", cfg.Readers, "reads under way at once")
	return func(ctx context.Context, e env, args []string) error {
		if len(args) != 1 {
			return usageError{fmt.Errorf("want one CLASS, got %d arguments", len(args))}
		}
		cfg.Class = args[0]
		if err := cfg.Validate(); err != nil {
			return usageError{err}
		}
		return runActorsList(ctx, cfg, e)
	}
}

func runActorsList(ctx context.Context, cfg actorsListConfig, e env) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	return withBucket(ctx, e, cfg.BucketURL, func(b ownership.Bucket) error {
		l, err := cluster.ListActors(ctx, b, cfg.Class, cluster.ActorOptions{Records: cfg.Records, Headers: cfg.Writes, Readers: cfg.Readers}, e.clock())
		if err != nil {
			return fmt.Errorf("%s: %w", describeBucket(cfg.BucketURL), err)
		}
		if len(l.Actors) == 0 {
			return fmt.Errorf("no actor of class %s in the bucket", cfg.Class)
		}
		if cfg.JSON {
			enc := json.NewEncoder(e.out)
			enc.SetIndent("", "  ")
			return enc.Encode(struct {
				Bucket string `json:"bucket"`
				cluster.ActorList
			}{describeBucket(cfg.BucketURL), l})
		}
		printActorList(e.out, l, cfg)
		return nil
	})
}

func printActorList(w io.Writer, l cluster.ActorList, cfg actorsListConfig) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "NAME\tSIZE\tOBJECTS"
	if cfg.Records {
		head += "\tRECORD\tNODE\tGEN"
	}
	if cfg.Writes {
		head += "\tSTATE GEN\tWRITES"
	}
	fmt.Fprintln(tw, head)
	var size int64
	var objects int
	records := map[cluster.RecordState]int{}
	var problems []string
	for _, a := range l.Actors {
		size, objects = size+a.Size(), objects+a.Objects
		name := a.Name
		if name == "" {
			name = a.Segment + " (hashed key)"
		}
		row := fmt.Sprintf("%s\t%s\t%d", safeText(name, 0), humanBytes(a.Size()), a.Objects)
		if cfg.Records {
			records[a.Record]++
			node, gen := "-", "-"
			switch a.Record {
			case cluster.RecordHeld, cluster.RecordEnded:
				node, gen = string(a.Node), strconv.FormatUint(uint64(a.Generation), 10)
			case cluster.RecordFree:
				node, gen = "("+string(a.Node)+")", strconv.FormatUint(uint64(a.Generation), 10)
			}
			row += fmt.Sprintf("\t%s\t%s\t%s", a.Record, node, gen)
		}
		if cfg.Writes {
			if a.State != nil {
				row += fmt.Sprintf("\t%d\t%d", a.State.Generation, a.State.Writes)
			} else {
				row += "\t-\t-"
			}
		}
		if a.Err != "" {
			problems = append(problems, fmt.Sprintf("%s: %s", name, a.Err))
		}
		fmt.Fprintln(tw, row)
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%s of class %s, %s in %s", plural(len(l.Actors), "actor"), l.Class, humanBytes(size), plural(objects, "object"))
	if cfg.Records {
		fmt.Fprintf(w, "; records: %d held, %d ended, %d free, %d none", records[cluster.RecordHeld], records[cluster.RecordEnded],
			records[cluster.RecordFree], records[cluster.RecordNone])
		if n := records[cluster.RecordUnreadable]; n > 0 {
			fmt.Fprintf(w, ", %d unreadable", n)
		}
	}
	fmt.Fprintln(w)
	if cfg.Records {
		fmt.Fprintln(w, "held: by a live node, resident there or parked beside its sockets (the bucket cannot tell which);")
		fmt.Fprintln(w, "ended: by a process that has ended, any node may acquire it; free: released, (NODE) held it last.")
	}
	for _, p := range problems {
		fmt.Fprintf(w, "  %s\n", p)
	}
}

// plural is n and what, made plural unless n is 1.
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// humanBytes is n in B, KiB, MiB or GiB.
func humanBytes(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}

// safeText is b as a person may read it on a terminal: as it is when it
// is printable UTF-8 (and does not begin with a quote or 0x, which would
// read as one of the other forms), quoted with Go escapes when it is
// UTF-8, 0x and hexadecimal otherwise. width > 0 cuts it past width
// characters, saying how many bytes it had.
func safeText[T string | []byte](b T, width int) string {
	s := string(b)
	var out string
	switch {
	case !utf8.ValidString(s):
		out = "0x" + hex.EncodeToString([]byte(s))
	case s == "" || strings.HasPrefix(s, `"`) || strings.HasPrefix(s, "0x") || strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
		out = strconv.Quote(s)
	default:
		out = s
	}
	if width > 0 && utf8.RuneCountInString(out) > width {
		out = string([]rune(out)[:width]) + fmt.Sprintf("... (%d bytes)", len(s))
	}
	return out
}

// jsonBytes is b in a JSON object: as a string under name when it is
// UTF-8, otherwise in base64 under name+"_base64".
func jsonBytes(obj map[string]any, name string, b []byte) {
	if utf8.Valid(b) {
		obj[name] = string(b)
	} else {
		obj[name+"_base64"] = base64.StdEncoding.EncodeToString(b)
	}
}

// actorsGetConfig is what `wasmkeep actors get` runs with.
type actorsGetConfig struct {
	actorsFlags
	Actor  ownership.Actor
	Key    string
	HasKey bool
	Prefix string
	All    bool
	JSON   bool
	Raw    bool
	Width  int
}

func (c actorsGetConfig) Validate() error {
	var errs []error
	if c.HasKey && c.Prefix != "" {
		errs = append(errs, errors.New("give KEY or --prefix, not both"))
	}
	if c.Raw && (!c.HasKey || c.JSON) {
		errs = append(errs, errors.New("--raw writes one KEY's value: give KEY, and not --json"))
	}
	if c.Width < 0 {
		errs = append(errs, fmt.Errorf("--width %d: want 0 or more", c.Width))
	}
	if c.HasKey && strings.HasPrefix(c.Key, actors.NodePrefix) && !c.All {
		errs = append(errs, errors.New("KEY begins with the byte 0x00, a node's own key: add --all"))
	}
	return errors.Join(append(errs, c.actorsFlags.Validate())...)
}

func setupActorsGet(fs *flag.FlagSet) action {
	cfg := actorsGetConfig{Width: 100}
	cfg.register(fs, time.Minute)
	fs.StringVar(&cfg.Prefix, "prefix", "", "list only the keys that begin with `P`")
	fs.BoolVar(&cfg.All, "all", false, "show the node's own keys too (under the byte 0x00: SQL pages, event keys)")
	fs.BoolVar(&cfg.JSON, "json", false, "print one JSON object (keys and values as strings when UTF-8, else in base64 under key_base64, value_base64)")
	fs.BoolVar(&cfg.Raw, "raw", false, "write KEY's value as it is, nothing else")
	fs.IntVar(&cfg.Width, "width", cfg.Width, "in a listing, cut values past this many characters (0: never)")
	return func(ctx context.Context, e env, args []string) error {
		if len(args) < 1 || len(args) > 2 {
			return usageError{fmt.Errorf("want CLASS/NAME and perhaps KEY, got %d arguments", len(args))}
		}
		a, err := parseActor(args[0])
		if err != nil {
			return usageError{err}
		}
		cfg.Actor = a
		if len(args) == 2 {
			cfg.Key, cfg.HasKey = args[1], true
		}
		if err := cfg.Validate(); err != nil {
			return usageError{err}
		}
		return runActorsGet(ctx, cfg, e)
	}
}

func runActorsGet(ctx context.Context, cfg actorsGetConfig, e env) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	a := cfg.Actor
	return withBucket(ctx, e, cfg.BucketURL, func(b ownership.Bucket) error {
		return withSnapshot(ctx, b, a, func(s *actorstore.Snapshot) error {
			var entries []actors.Entry
			if cfg.HasKey {
				v, ok, err := s.Get(ctx, cfg.Key)
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("no key %s in %s/%s", safeText(cfg.Key, 0), a.Class, a.Name)
				}
				entries = []actors.Entry{{Key: cfg.Key, Value: v}}
			} else {
				var err error
				if entries, err = s.List(ctx, actors.ListOptions{Prefix: cfg.Prefix}, cfg.All); err != nil {
					return err
				}
			}
			switch {
			case cfg.JSON:
				out := []map[string]any{}
				for _, en := range entries {
					obj := map[string]any{}
					jsonBytes(obj, "key", []byte(en.Key))
					jsonBytes(obj, "value", en.Value)
					out = append(out, obj)
				}
				enc := json.NewEncoder(e.out)
				enc.SetIndent("", "  ")
				return enc.Encode(struct {
					Actor      string               `json:"actor"`
					Exists     bool                 `json:"exists"`
					Generation ownership.Generation `json:"generation"`
					Writes     uint64               `json:"writes"`
					// KeysValues is the bytes of every key and value, the
					// node's included: what counts against the actor's bound.
					KeysValues int              `json:"keys_values_bytes"`
					Objects    int              `json:"objects"`
					Entries    []map[string]any `json:"entries"`
				}{a.String(), s.Exists(), s.Header().Gen, s.Header().Seq, s.Size(), s.Objects(), out})
			case cfg.Raw:
				_, err := e.out.Write(entries[0].Value)
				return err
			case cfg.HasKey:
				fmt.Fprintln(e.out, safeText(entries[0].Value, 0))
				return nil
			}
			if len(entries) == 0 {
				what := "no key"
				if cfg.Prefix != "" {
					what = "no key beginning with " + safeText(cfg.Prefix, 0)
				}
				fmt.Fprintf(e.err, "%s/%s has %s\n", a.Class, a.Name, what)
				return nil
			}
			tw := tabwriter.NewWriter(e.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KEY\tBYTES\tVALUE")
			for _, en := range entries {
				fmt.Fprintf(tw, "%s\t%d\t%s\n", safeText(en.Key, 0), len(en.Value), safeText(en.Value, cfg.Width))
			}
			return tw.Flush()
		})
	})
}

// actorsSQLConfig is what `wasmkeep actors sql` runs with.
type actorsSQLConfig struct {
	actorsFlags
	Actor ownership.Actor
	Query string
	TSV   bool
	JSON  bool
}

func (c actorsSQLConfig) Validate() error {
	var errs []error
	if c.TSV && c.JSON {
		errs = append(errs, errors.New("--tsv or --json, not both"))
	}
	if strings.TrimSpace(c.Query) == "" {
		errs = append(errs, errors.New("empty QUERY"))
	}
	return errors.Join(append(errs, c.actorsFlags.Validate())...)
}

func setupActorsSQL(fs *flag.FlagSet) action {
	var cfg actorsSQLConfig
	cfg.register(fs, time.Minute)
	fs.BoolVar(&cfg.TSV, "tsv", false, "print tab-separated values: a line of column names, then a line per row")
	fs.BoolVar(&cfg.JSON, "json", false, "print one JSON object: columns, and rows as arrays (blobs in base64)")
	return func(ctx context.Context, e env, args []string) error {
		if len(args) != 2 {
			return usageError{fmt.Errorf("want CLASS/NAME and QUERY, got %d arguments (quote the query)", len(args))}
		}
		a, err := parseActor(args[0])
		if err != nil {
			return usageError{err}
		}
		cfg.Actor, cfg.Query = a, args[1]
		if err := cfg.Validate(); err != nil {
			return usageError{err}
		}
		return runActorsSQL(ctx, cfg, e)
	}
}

func runActorsSQL(ctx context.Context, cfg actorsSQLConfig, e env) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	return withBucket(ctx, e, cfg.BucketURL, func(b ownership.Bucket) error {
		return withSnapshot(ctx, b, cfg.Actor, func(s *actorstore.Snapshot) error {
			rows, err := s.Query(ctx, cfg.Query)
			if err != nil {
				return err
			}
			if cfg.JSON {
				enc := json.NewEncoder(e.out)
				enc.SetIndent("", "  ")
				return enc.Encode(map[string]any{"columns": rows.Columns, "rows": rows.Rows})
			}
			sep := "\t"
			w := e.out
			var tw *tabwriter.Writer
			if !cfg.TSV {
				tw = tabwriter.NewWriter(e.out, 0, 4, 2, ' ', 0)
				w = tw
			}
			cols := make([]string, len(rows.Columns))
			for i, c := range rows.Columns {
				cols[i] = safeText(c, 0)
			}
			fmt.Fprintln(w, strings.Join(cols, sep))
			for _, r := range rows.Rows {
				cells := make([]string, len(r))
				for i, v := range r {
					cells[i] = sqlText(v)
				}
				fmt.Fprintln(w, strings.Join(cells, sep))
			}
			if tw != nil {
				if err := tw.Flush(); err != nil {
					return err
				}
			}
			if !cfg.TSV {
				fmt.Fprintf(e.err, "(%d rows)\n", len(rows.Rows))
			}
			return nil
		})
	})
}

// sqlText is one SQL value as a cell.
func sqlText(v any) string {
	switch v := v.(type) {
	case nil:
		return "NULL"
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case string:
		return safeText(v, 0)
	case []byte:
		return "x'" + hex.EncodeToString(v) + "'"
	}
	return fmt.Sprint(v)
}

// actorsExportConfig is what `wasmkeep actors export` runs with.
type actorsExportConfig struct {
	actorsFlags
	Actor  ownership.Actor
	Output string
}

func setupActorsExport(fs *flag.FlagSet) action {
	var cfg actorsExportConfig
	cfg.register(fs, 10*time.Minute)
	fs.StringVar(&cfg.Output, "output", "", "write the export to `FILE` (written whole under a temporary name, then renamed) instead of standard output")
	return func(ctx context.Context, e env, args []string) error {
		if len(args) != 1 {
			return usageError{fmt.Errorf("want one CLASS/NAME, got %d arguments", len(args))}
		}
		a, err := parseActor(args[0])
		if err != nil {
			return usageError{err}
		}
		cfg.Actor = a
		if err := cfg.Validate(); err != nil {
			return usageError{err}
		}
		return runActorsExport(ctx, cfg, e)
	}
}

func runActorsExport(ctx context.Context, cfg actorsExportConfig, e env) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	return withBucket(ctx, e, cfg.BucketURL, func(b ownership.Bucket) error {
		return withSnapshot(ctx, b, cfg.Actor, func(s *actorstore.Snapshot) error {
			var info actorstore.ExportInfo
			var err error
			if cfg.Output == "" {
				info, err = s.Export(ctx, e.out, e.clock())
				if err != nil {
					// What is out is not an export; a reader refuses it.
					return err
				}
			} else if info, err = exportToFile(ctx, s, cfg.Output, e.clock()); err != nil {
				return err
			}
			fmt.Fprintf(e.err, "exported %s: %d entries, %s of keys and values (state at generation %d, write %d); sha256 %s\n",
				cfg.Actor, info.Entries, humanBytes(info.Bytes), info.Generation, info.Writes, info.Sum)
			return nil
		})
	})
}

// exportToFile writes s's export to path: to a temporary file beside it,
// synced, then renamed, so that path never holds part of an export.
func exportToFile(ctx context.Context, s *actorstore.Snapshot, path string, now time.Time) (actorstore.ExportInfo, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return actorstore.ExportInfo{}, err
	}
	defer os.Remove(f.Name()) // after the rename, nothing
	info, err := s.Export(ctx, f, now)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	return info, err
}

// actorsImportConfig is what `wasmkeep actors import` runs with.
type actorsImportConfig struct {
	actorsFlags
	Actor          ownership.Actor
	File           string
	ReplaceDamaged bool
}

func setupActorsImport(fs *flag.FlagSet) action {
	var cfg actorsImportConfig
	cfg.register(fs, 10*time.Minute)
	fs.BoolVar(&cfg.ReplaceDamaged, "replace-damaged", false, "replace a state object that does not decode (a restore); without it such an actor is refused")
	return func(ctx context.Context, e env, args []string) error {
		if len(args) != 2 {
			return usageError{fmt.Errorf("want CLASS/NAME and FILE, got %d arguments", len(args))}
		}
		a, err := parseActor(args[0])
		if err != nil {
			return usageError{err}
		}
		cfg.Actor, cfg.File = a, args[1]
		if err := cfg.Validate(); err != nil {
			return usageError{err}
		}
		return runActorsImport(ctx, cfg, e)
	}
}

// errHeld refuses an import into an actor a node holds.
type errHeld struct {
	actor ownership.Actor
	h     cluster.Holder
	now   time.Time
}

func (e errHeld) Error() string {
	rec := e.h.Record
	msg := fmt.Sprintf("refusing to import into %s: node %s (instance %s) holds it at generation %d, resident there or "+
		"parked beside its sockets, and may act on the state it loaded", e.actor, rec.Node, rec.Instance, rec.Generation)
	if l := e.h.Lease; l != nil && l.WrittenAt > 0 {
		msg += fmt.Sprintf(" (its lease was last written %s ago)", e.now.Sub(time.UnixMilli(l.WrittenAt)).Round(100*time.Millisecond))
	}
	return msg + fmt.Sprintf(". Let the actor hibernate (no events for the node's --idle-timeout; a parked actor waits for "+
		"its sockets to close), or have node %s hand over every actor ('wasmkeep cluster drain %s', later 'cluster undrain "+
		"%s'), and keep its clients away until the import is done; if node %s is dead, 'wasmkeep cluster fence %s' frees "+
		"its records. Then import again", rec.Node, rec.Node, rec.Node, rec.Node, rec.Node)
}

func runActorsImport(ctx context.Context, cfg actorsImportConfig, e env) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	f, err := os.Open(cfg.File)
	if err != nil {
		return err
	}
	defer f.Close()
	a := cfg.Actor
	var holder cluster.Holder
	return withBucket(ctx, e, cfg.BucketURL, func(b ownership.Bucket) error {
		check := func(ctx context.Context) (ownership.Generation, error) {
			h, err := cluster.ReadHolder(ctx, b, a)
			if err == nil && h.State == cluster.RecordNone {
				// A record first, so that an acquisition from now on
				// seals the state and cannot serve what it loaded
				// before the import lands (cluster.ClaimRecord).
				var nonce string
				if nonce, err = newNonce(e.clock()); err == nil {
					h, err = cluster.ClaimRecord(ctx, b, a, nonce)
				}
			}
			if err != nil {
				return 0, err
			}
			holder = h
			switch h.State {
			case cluster.RecordHeld:
				return 0, errHeld{actor: a, h: h, now: e.clock()}
			case cluster.RecordUnreadable:
				return 0, fmt.Errorf("refusing to import into %s: its ownership record cannot be read, so who holds it is unknown: %w", a, h.Err)
			case cluster.RecordNone:
				return 0, nil
			}
			return h.Record.Generation, nil
		}
		imp, err := actorstore.ImportActor(ctx, b, a, f, actorstore.ImportOptions{Check: check, OverDamaged: cfg.ReplaceDamaged})
		var damaged *actorhost.DamagedError
		switch {
		case errors.Is(err, actorstore.ErrBadExport):
			return fmt.Errorf("%s: %w; nothing written", cfg.File, err)
		case errors.As(err, &damaged) && !cfg.ReplaceDamaged:
			return fmt.Errorf("%w; nothing written (--replace-damaged replaces it)", err)
		case errors.Is(err, actorstore.ErrImportRaced):
			return fmt.Errorf("%s: %w; a node may have acquired the actor: see 'wasmkeep actors list %s'", a, err, a.Class)
		case err != nil:
			return err
		}
		if imp.Class != a.Class || imp.Name != a.Name {
			fmt.Fprintf(e.err, "note: the export is of %s/%s, imported into %s\n", imp.Class, imp.Name, a)
		}
		what := "a new storage"
		if imp.Replaced {
			what = fmt.Sprintf("its storage replaced; %d old objects deleted", imp.Deleted)
			if imp.Left > 0 {
				what += fmt.Sprintf(", %d left for the next hold to delete", imp.Left)
			}
		}
		fmt.Fprintf(e.out, "imported %s into %s: %d entries, %s of keys and values, %d objects written (%s); state at generation %d, write %d\n",
			cfg.File, a, imp.Entries, humanBytes(imp.Bytes), imp.Written, what, imp.Header.Gen, imp.Header.Seq)
		switch {
		case holder.Record != nil && holder.Record.Node == cluster.ImportHolder:
			fmt.Fprintf(e.out, "no node has held %s: its record is free (the import wrote it, naming %s, no node), and the first event for it acquires it.\n",
				a, cluster.ImportHolder)
		case holder.State == cluster.RecordEnded:
			fmt.Fprintf(e.out, "its record names node %s, which has ended: the next event for %s acquires it on any node.\n", holder.Record.Node, a)
		default:
			fmt.Fprintf(e.out, "the next event for %s acquires it on any node.\n", a)
		}
		return nil
	})
}
