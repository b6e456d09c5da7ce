package actorstore

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/kvrun"
	"github.com/wasmkeep/wasmkeep/ownership"
)

// An export is one actor's whole storage, node keys included (the pages
// of its SQL database, the event keys it remembers), as one Snapshot
// holds it, in a file of its own format (version 1):
//
//	"wasmkeep-actor-export 1\n"
//	the header: one line of JSON (ExportHeader), then "\n"
//	the entries, in ascending byte order of their keys, each:
//	    0x01, uvarint key length, key, uvarint value length, value
//	the end:
//	    0x00, uvarint count of entries, uvarint bytes of their keys and
//	    values, then the SHA-256 of every byte of the file before it
//	    (32 bytes), and nothing after
//
// A reader refuses another first line (another format or version), keys
// out of order, repeated or past the storage's limits, counts that
// disagree, a sum that does not match, and bytes past the sum: a file cut
// short or changed is never imported as if it were whole.
const exportMagic = "wasmkeep-actor-export 1\n"

// ExportVersion is the version of the export format this code writes and
// reads.
const ExportVersion = 1

// ExportHeader is the header of an export: what it was taken of.
type ExportHeader struct {
	Format int    `json:"format"` // ExportVersion
	Class  string `json:"class"`
	Name   string `json:"name"`
	// Generation and Writes are the exported state object's header: the
	// generation of the hold that last wrote or sealed it, and its count
	// of writes (zero for an actor with no state object).
	Generation uint64 `json:"generation"`
	Writes     uint64 `json:"writes"`
	// ExportedAt is the exporting machine's clock when the state object
	// was read.
	ExportedAt time.Time `json:"exported_at"`
}

// ExportInfo is what an export holds: its header, and its entries'
// count and bytes (keys plus values) as its end gives them, checked.
type ExportInfo struct {
	ExportHeader
	Entries int64
	Bytes   int64
	// Sum is the SHA-256 of the file before it, hexadecimal.
	Sum string
}

// ErrBadExport marks a file that is not a whole export of this format.
var ErrBadExport = errors.New("not a valid actor export")

// Export writes the Snapshot's whole storage, node keys included, to w in
// the export format, its header saying at as the time of the export.
func (s *Snapshot) Export(ctx context.Context, w io.Writer, at time.Time) (ExportInfo, error) {
	info := ExportInfo{ExportHeader: ExportHeader{Format: ExportVersion, Class: s.actor.Class, Name: s.actor.Name,
		Generation: uint64(s.header.Gen), Writes: s.header.Seq, ExportedAt: at.UTC()}}
	header, err := json.Marshal(info.ExportHeader)
	if err != nil {
		return ExportInfo{}, err
	}
	h := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(w, h), 64<<10)
	bw.WriteString(exportMagic)
	bw.Write(header)
	bw.WriteByte('\n')
	var n [binary.MaxVarintLen64]byte
	err = s.Each(ctx, func(key string, value []byte) error {
		bw.WriteByte(1)
		bw.Write(binary.AppendUvarint(n[:0], uint64(len(key))))
		bw.WriteString(key)
		bw.Write(binary.AppendUvarint(n[:0], uint64(len(value))))
		_, err := bw.Write(value)
		info.Entries++
		info.Bytes += int64(len(key) + len(value))
		return err
	})
	if err != nil {
		return ExportInfo{}, err
	}
	bw.WriteByte(0)
	bw.Write(binary.AppendUvarint(n[:0], uint64(info.Entries)))
	bw.Write(binary.AppendUvarint(n[:0], uint64(info.Bytes)))
	if err := bw.Flush(); err != nil {
		return ExportInfo{}, err
	}
	sum := h.Sum(nil)
	info.Sum = fmt.Sprintf("%x", sum)
	if _, err := w.Write(sum); err != nil {
		return ExportInfo{}, err
	}
	return info, nil
}

// ReadExport reads and checks a whole export from r, calling fn (if not
// nil) with each entry in order; value is valid only during the call.
// Entries are handed to fn before the end is checked: a caller that acts
// on them must wait for ReadExport's nil. Every error of the file's own
// wraps ErrBadExport.
func ReadExport(r io.Reader, fn func(key string, value []byte) error) (ExportInfo, error) {
	d, err := newExportDecoder(r)
	if err != nil {
		return ExportInfo{}, err
	}
	for {
		e, ok := d.Next()
		if !ok {
			break
		}
		if fn != nil {
			if err := fn(e.Key, e.Value); err != nil {
				return ExportInfo{}, err
			}
		}
	}
	if err := d.Err(); err != nil {
		return ExportInfo{}, err
	}
	return d.info, nil
}

// exportDecoder reads an export's entries one by one (a kvrun.Iterator,
// so that an import writes them into runs as it reads them) and checks
// the end once they are done: Next returns false with Err nil only for a
// whole, checked export.
type exportDecoder struct {
	r    *bufio.Reader
	h    hash.Hash
	info ExportInfo
	last string
	seen bool // an entry was read (last is its key)
	done bool
	err  error
}

func newExportDecoder(r io.Reader) (*exportDecoder, error) {
	d := &exportDecoder{r: bufio.NewReaderSize(r, 64<<10), h: sha256.New()}
	magic, err := d.line(len(exportMagic))
	if err != nil || magic != exportMagic {
		if err == nil || errors.Is(err, ErrBadExport) {
			return nil, fmt.Errorf("%w: it does not begin with %q", ErrBadExport, exportMagic[:len(exportMagic)-1])
		}
		return nil, err
	}
	line, err := d.line(64 << 10)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(line)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d.info.ExportHeader); err != nil {
		return nil, fmt.Errorf("%w: header: %w", ErrBadExport, err)
	}
	if d.info.Format != ExportVersion {
		return nil, fmt.Errorf("%w: header says format %d, this reads %d", ErrBadExport, d.info.Format, ExportVersion)
	}
	return d, nil
}

// line reads up to and including the next '\n', at most max bytes.
func (d *exportDecoder) line(max int) (string, error) {
	var b []byte
	for len(b) < max {
		c, err := d.byte()
		if err != nil {
			return "", err
		}
		b = append(b, c)
		if c == '\n' {
			return string(b), nil
		}
	}
	return "", fmt.Errorf("%w: a line of more than %d bytes", ErrBadExport, max)
}

// byte reads one byte into the sum; the file ending is ErrBadExport.
func (d *exportDecoder) byte() (byte, error) {
	c, err := d.r.ReadByte()
	if err != nil {
		return 0, d.short(err)
	}
	d.h.Write([]byte{c})
	return c, nil
}

func (d *exportDecoder) short(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: the file ends before the export does (cut short?)", ErrBadExport)
	}
	return err
}

// uvarint reads an unsigned varint into the sum.
func (d *exportDecoder) uvarint(what string) (uint64, error) {
	var x uint64
	for i, shift := 0, uint(0); i < binary.MaxVarintLen64; i, shift = i+1, shift+7 {
		c, err := d.byte()
		if err != nil {
			return 0, err
		}
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				break
			}
			return x | uint64(c)<<shift, nil
		}
		x |= uint64(c&0x7f) << shift
	}
	return 0, fmt.Errorf("%w: %s: a number past 64 bits", ErrBadExport, what)
}

// field reads n bytes into the sum.
func (d *exportDecoder) field(n uint64, max int, what string) ([]byte, error) {
	if n > uint64(max) {
		return nil, fmt.Errorf("%w: %s of %d bytes, over %d", ErrBadExport, what, n, max)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(d.r, b); err != nil {
		return nil, d.short(err)
	}
	d.h.Write(b)
	return b, nil
}

func (d *exportDecoder) fail(err error) (kvrun.Entry, bool) {
	d.err, d.done = err, true
	return kvrun.Entry{}, false
}

// Next reads the next entry; at the end it checks the counts and the sum.
func (d *exportDecoder) Next() (kvrun.Entry, bool) {
	if d.done {
		return kvrun.Entry{}, false
	}
	kind, err := d.byte()
	if err != nil {
		return d.fail(err)
	}
	switch kind {
	case 0:
		return d.fail(d.end())
	case 1:
	default:
		return d.fail(fmt.Errorf("%w: an entry of kind %d after %d entries", ErrBadExport, kind, d.info.Entries))
	}
	n, err := d.uvarint("key length")
	if err != nil {
		return d.fail(err)
	}
	if n == 0 {
		return d.fail(fmt.Errorf("%w: an empty key", ErrBadExport))
	}
	key, err := d.field(n, actors.MaxKeyLen, "a key")
	if err != nil {
		return d.fail(err)
	}
	if d.seen && string(key) <= d.last {
		return d.fail(fmt.Errorf("%w: key %.64q after %.64q: keys out of order", ErrBadExport, key, d.last))
	}
	if n, err = d.uvarint("value length"); err != nil {
		return d.fail(err)
	}
	value, err := d.field(n, actors.MaxValueLen, "a value")
	if err != nil {
		return d.fail(err)
	}
	d.last, d.seen = string(key), true
	d.info.Entries++
	d.info.Bytes += int64(len(key) + len(value))
	return kvrun.Entry{Key: d.last, Value: value}, true
}

// end checks the export's end, the 0x00 read.
func (d *exportDecoder) end() error {
	count, err := d.uvarint("count of entries")
	if err != nil {
		return err
	}
	total, err := d.uvarint("bytes of the entries")
	if err != nil {
		return err
	}
	if count != uint64(d.info.Entries) || total != uint64(d.info.Bytes) {
		return fmt.Errorf("%w: its end counts %d entries of %d bytes, the file holds %d of %d", ErrBadExport, count, total, d.info.Entries, d.info.Bytes)
	}
	want := d.h.Sum(nil)
	got := make([]byte, len(want))
	if _, err := io.ReadFull(d.r, got); err != nil {
		return d.short(err)
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("%w: SHA-256 mismatch: the file says %x, its bytes sum to %x", ErrBadExport, got, want)
	}
	if _, err := d.r.ReadByte(); err != io.EOF {
		if err != nil {
			return err
		}
		return fmt.Errorf("%w: bytes after the end", ErrBadExport)
	}
	d.info.Sum = fmt.Sprintf("%x", want)
	return nil
}

// Err is what ended the entries: nil for a whole, checked export.
func (d *exportDecoder) Err() error { return d.err }

// ImportOptions shape ImportActor.
type ImportOptions struct {
	// Check is called once the state object's version has been read, and
	// before anything is written. It returns an error, which ends the
	// import, when a node holds the actor or keeps it parked (or the
	// record cannot be read); otherwise the generation of the actor's
	// ownership record, 0 when it has none.
	Check func(ctx context.Context) (ownership.Generation, error)
	// OverDamaged lets the import replace a state object whose bytes do
	// not decode (a restore from an export); without it such an object is
	// refused as damaged. An object the store itself will not read
	// (ownership.ErrDamaged from its Get) cannot be replaced: there is no
	// version to condition the write on.
	OverDamaged bool
	// RunPart is about the largest run object written; zero:
	// DefaultRunPart.
	RunPart int
}

// Imported is what ImportActor wrote.
type Imported struct {
	// ExportInfo is the export's.
	ExportInfo
	// Header is the written state object's: the generation kept, the
	// count of writes one more.
	Header ownership.StateHeader
	ETag   ownership.ETag
	// Replaced says a state object was there (it is replaced whole).
	Replaced bool
	// Written counts the objects written: run parts, manifests and the
	// state object. Deleted counts the objects of the replaced storage
	// deleted afterwards; Left those not deleted, which the new state
	// object lists as garbage for the next hold to delete.
	Written, Deleted, Left int
}

// ErrImportRaced: the state object changed between the import's read of
// it and its write (a node acquired the actor, whose seal rewrote it, or
// another import landed first): the import's write was refused and
// nothing of it is visible.
var ErrImportRaced = errors.New("the actor's state object changed during the import")

// ErrAcquiring: the state object is sealed at a generation above the
// record's: an acquisition has sealed it and not yet written its record
// (or never will, its node having died between the two writes).
var ErrAcquiring = errors.New("an acquisition of the actor is under way")

// ImportActor replaces actor a's whole storage in b with the export src
// holds, checked whole first. It writes as a commit does, with the
// runtime's own layout: the entries go into the state object's memory
// table when they are few, otherwise into a run of parts (and its
// manifest) written If-None-Match first; then the state object, on the
// condition of the version read.
//
// The order is what makes it safe beside nodes that may acquire the actor
// meanwhile:
//
//  1. read the state object: its version (ETag, or its absence) and its
//     header;
//  2. read the actor's record (opt.Check) and stop if a node holds it or
//     keeps it parked: such a node may act on the state it loaded;
//  3. write the runs, then the state object, If-Match on the version of
//     step 1 (If-None-Match when it was absent).
//
// An acquisition that comes after step 2 seals the state object before
// it writes the record (ownership/seal.go), and the seal is a write of
// the object: if it lands before step 3, the import is refused
// (ErrImportRaced) rather than written under a hold that has loaded the
// state before it, where it would be lost or mixed with the hold's
// commits; if it lands after, it seals the imported state, which the new
// hold then serves. The seal thus orders every acquisition before or
// after the import, never across it. An acquisition whose seal landed
// before step 1 and whose record write had not landed by step 2 shows in
// the state object itself, stamped above the record's generation: its
// hold would take the sealed copy its grant carries without reading the
// object again, so the import refuses it (ErrAcquiring). The one
// acquisition that writes nothing to the state object is the first of an
// actor with no record (generation 1, nothing to seal): were it to come
// between steps 2 and 3, its hold could answer reads from the state it
// loaded before the import landed. So the check of step 2 gives an actor
// that has no record a free one (the command line's does, with
// cluster.ClaimRecord), and every acquisition after it seals.
//
// The written header keeps the generation read (0 for an actor with no
// state object, the record's for a damaged one whose header cannot be
// read), so that the stamp the seal compares with the record stays where
// the acquisitions left it, and raises the count of writes, so that the
// new object's bytes differ from every earlier version. The runs are
// named by that generation; the replaced object's runs are listed as
// garbage in the new one and deleted once it has landed.
func ImportActor(ctx context.Context, b ownership.Bucket, a ownership.Actor, src io.ReadSeeker, opt ImportOptions) (Imported, error) {
	if opt.Check == nil {
		return Imported{}, errors.New("import: no check of the actor's record")
	}
	info, err := ReadExport(src, nil)
	if err != nil {
		return Imported{}, err
	}
	if _, err := src.Seek(0, io.SeekStart); err != nil {
		return Imported{}, err
	}
	part := opt.RunPart
	if part <= 0 {
		part = DefaultRunPart
	}
	o := RunOpener{b: b, timeout: snapshotReadTimeout, part: part, reads: &IOCounts{}}

	// 1. The state object's version.
	key := StateKey(a)
	imp := Imported{ExportInfo: info}
	var (
		cond       ownership.Condition
		read       ownership.StateHeader
		old        *State
		headerRead = true
	)
	obj, err := b.Get(ctx, key)
	switch ownership.OutcomeOf(err) {
	case ownership.Landed:
		imp.Replaced, cond = true, ownership.IfMatch(obj.ETag)
		h, payload, herr := ownership.DecodeState(obj.Body)
		var derr error
		if herr == nil {
			read = h
			old, derr = decodeHead(h, payload)
		}
		if err := errors.Join(herr, derr); err != nil {
			if !opt.OverDamaged {
				return Imported{}, &DamagedError{Actor: a, Key: key, Err: err}
			}
			headerRead, old = herr == nil, nil
		}
	case ownership.NotFound:
		cond = ownership.IfAbsent()
	case ownership.Damaged:
		return Imported{}, &DamagedError{Actor: a, Key: key, Err: fmt.Errorf("%w (the store will not read it, so no write can be conditioned on it)", err)}
	default:
		return Imported{}, fmt.Errorf("read %s: %w", key, err)
	}
	if old != nil {
		// The names of the runs it lists through manifests, to delete
		// them; one that cannot be read is left to a later hold's sweep.
		_ = old.LoadManifests(ctx, a, o)
	}

	// 2. The record.
	recGen, err := opt.Check(ctx)
	if err != nil {
		return Imported{}, err
	}
	// (recGen is 0 only for a check that leaves an actor without a
	// record: see the comment above.)
	if imp.Replaced && headerRead && recGen > 0 && read.Gen > recGen {
		return Imported{}, fmt.Errorf("%w: its state object is sealed at generation %d and its record says %d: a node is "+
			"acquiring the actor, or died between sealing it and writing its record; try again in a moment, and if this "+
			"stays, send the actor one event (a node then takes it at generation %d) and import once it has let it go",
			ErrAcquiring, read.Gen, recGen, read.Gen)
	}
	gen := read.Gen
	if !headerRead {
		gen = recGen
	}
	st := NewState(ownership.StateHeader{Gen: gen, Seq: read.Seq + 1})

	// 3. The runs, then the state object.
	var written []RunName
	undo := func() {
		if len(written) > 0 {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), snapshotReadTimeout)
			DeleteRuns(dctx, b, a, written)
			cancel()
		}
	}
	dec, err := newExportDecoder(src)
	if err != nil {
		return Imported{}, err
	}
	if info.Bytes <= flushAt {
		for e, ok := dec.Next(); ok; e, ok = dec.Next() {
			st.mem[e.Key] = memEntry{v: e.Value}
			st.memBytes += len(e.Key) + len(e.Value)
		}
		err = dec.Err()
	} else {
		var out *Run
		out, err = writeRun(ctx, o, a, gen, dec, false)
		for _, p := range out.parts {
			written = append(written, p.name())
		}
		if len(out.parts) > 0 {
			st.runs = []*Run{out}
		}
	}
	if err == nil && dec.info.Sum != info.Sum {
		err = fmt.Errorf("%w: the file changed while it was imported", ErrBadExport)
	}
	if err != nil {
		undo()
		return Imported{}, err
	}
	st.size = int(info.Bytes)
	if old != nil {
		for _, r := range old.runs {
			old.Drop(r)
		}
		st.garbage = old.garbage
	}
	hd, err := st.EncodeHead(gen, 0)
	if err != nil {
		undo()
		return Imported{}, err
	}
	for _, m := range hd.manifests {
		written = append(written, m.name)
		if _, err := b.Put(ctx, ownership.RunKey(a, m.name.gen, m.name.n), m.body, ownership.IfAbsent()); err != nil {
			undo()
			return Imported{}, fmt.Errorf("write manifest: %w", err)
		}
	}
	body := ownership.EncodeState(st.StateHeader, hd.payload)
	etag, err := b.Put(ctx, key, body, cond)
	switch ownership.OutcomeOf(err) {
	case ownership.Landed:
	case ownership.Refused, ownership.NotFound:
		undo()
		return Imported{}, fmt.Errorf("%w: nothing imported (%w)", ErrImportRaced, err)
	case ownership.Unknown:
		// It may land yet: what it lists must stay.
		return Imported{}, fmt.Errorf("write %s: %w: the import may have landed or may still land; read the actor to see which", key, err)
	default:
		undo()
		return Imported{}, fmt.Errorf("write %s: %w", key, err)
	}
	imp.Header, imp.ETag, imp.Written = st.StateHeader, etag, len(written)+1
	if len(st.garbage) > 0 {
		deleted := DeleteRuns(ctx, b, a, st.garbage)
		imp.Deleted, imp.Left = len(deleted), len(st.garbage)-len(deleted)
	}
	return imp, nil
}
