package ownership

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"
)

// ETag names one version of one object. Stores hand it out on every landed
// write and it is opaque to callers: compare it for equality, pass it back in
// IfMatch, never parse it. Every write yields a new ETag, even for the same
// bytes, in every store wasmkeep ships; S3 itself derives ETags from content,
// which is why every record wasmkeep writes carries a nonce (see RATIONALE.md).
type ETag string

// Object is what a Get returns.
type Object struct {
	Body []byte
	ETag ETag
}

// ListEntry is one key in a listing.
type ListEntry struct {
	Key  string
	ETag ETag
	Size int64
}

// ListPage is one page of a listing, in ascending key order (byte order, as S3).
type ListPage struct {
	Entries []ListEntry
	// Truncated reports that more keys follow; list again with StartAfter set
	// to the last entry's key.
	Truncated bool
}

// ConditionKind says when a write may land.
type ConditionKind uint8

const (
	// Unconditional: the write always lands.
	Unconditional ConditionKind = iota
	// CreateOnly (If-None-Match: *): lands only when the key is absent.
	CreateOnly
	// ReplaceOnly (If-Match: etag): lands only when the key holds that version.
	ReplaceOnly
)

func (k ConditionKind) String() string {
	switch k {
	case Unconditional:
		return "unconditional"
	case CreateOnly:
		return "if-none-match"
	case ReplaceOnly:
		return "if-match"
	}
	return fmt.Sprintf("condition(%d)", uint8(k))
}

// Condition guards a write. The zero value is Unconditional.
type Condition struct {
	Kind ConditionKind
	ETag ETag // with ReplaceOnly
}

// Always is the unconditional write.
func Always() Condition { return Condition{} }

// IfAbsent is the create-only write (If-None-Match: *).
func IfAbsent() Condition { return Condition{Kind: CreateOnly} }

// IfMatch is the replace-only write (If-Match: etag).
func IfMatch(etag ETag) Condition { return Condition{Kind: ReplaceOnly, ETag: etag} }

func (c Condition) String() string {
	if c.Kind == ReplaceOnly {
		return fmt.Sprintf("if-match %s", c.ETag)
	}
	return c.Kind.String()
}

// Bucket is the only thing wasmkeep nodes share. Implementations must be safe
// for concurrent use; every call honours its context.
//
// Errors are the outcome. A call returns nil (landed), or an error for which
// OutcomeOf says one of NotFound, Refused, Unknown, Failed, Damaged or
// BucketDamaged. Callers branch on OutcomeOf or errors.Is with the sentinels
// below; they never fold Unknown into success or failure, nor Damaged into
// a failure that a retry could cure.
//
// wasmkeep lays out its keys so that any S3-compatible store can hold them,
// including servers that keep each object as a file named by its key: no key
// is ever the prefix-directory of another (never "a" beside "a/b"), and no
// '/'-separated segment is empty, "." or "..". Nor does it rely on an ETag
// being new for identical bytes: an ETag may be a hash of the content, so
// every record it writes carries a nonce.
type Bucket interface {
	// Get reads an object. Absent: ErrNotFound.
	Get(ctx context.Context, key string) (Object, error)
	// Put writes an object under a condition and returns its new ETag.
	// Condition not met: ErrPrecondition (also for IfMatch on a missing key).
	Put(ctx context.Context, key string, body []byte, cond Condition) (ETag, error)
	// Delete removes an object. Unconditional deletes of a missing key land
	// (as in S3); IfMatch on a missing key or another version: ErrPrecondition.
	// CreateOnly makes no sense for a delete and is refused as a bad argument.
	Delete(ctx context.Context, key string, cond Condition) error
	// List returns up to limit keys that start with prefix and sort after
	// startAfter (all keys when startAfter is empty), in ascending byte order.
	// limit <= 0 means the store's page size (1,000, as S3).
	List(ctx context.Context, prefix, startAfter string, limit int) (ListPage, error)
}

// RangeReader is a Bucket that reads part of an object: a block of a large
// object that is never rewritten in place, without the rest of it. It is
// optional. Callers read through ReadRange, which uses GetRange when the
// Bucket has it and otherwise reads the whole object and cuts the range
// out, so a Bucket that lacks it (a test's wrapper, say) gives the same
// answers at the cost of the whole object. Every store wasmkeep ships
// (memstore, dirstore, s3store) has it.
type RangeReader interface {
	Bucket
	// GetRange reads the bytes [off, off+n) of the object at key, and the
	// object's ETag: all of them from the version that ETag names. An
	// object that ends before off+n gives the bytes up to its end; one
	// that ends at or before off (a zero-length object, for any off)
	// gives an empty, non-nil body and its ETag, and no error. S3 answers
	// that case 416; a store turns it into the empty body, so that a
	// reader that runs off the end of an object learns the version it
	// read, as any other read does, and need not know the size first.
	//
	// Absent: ErrNotFound. off < 0 or n <= 0: ErrInvalidRange, and nothing
	// is sent. Otherwise errors are a Get's: ErrUnknownOutcome, ErrDamaged
	// (the store found the object damaged; how much of the object a range
	// read checks is the store's to say), ErrBucketDamaged, or a failure.
	GetRange(ctx context.Context, key string, off, n int64) (Object, error)
}

// ErrInvalidRange: a range read asked for a negative offset or for no
// bytes (n <= 0). OutcomeOf classifies it as Failed. Nothing was sent.
var ErrInvalidRange = errors.New("invalid range")

// ValidateRange reports whether off and n name a range every store reads.
func ValidateRange(off, n int64) error {
	switch {
	case off < 0:
		return fmt.Errorf("%w: offset %d is negative", ErrInvalidRange, off)
	case n <= 0:
		return fmt.Errorf("%w: length %d, want at least 1", ErrInvalidRange, n)
	}
	return nil
}

// ReadRange reads the bytes [off, off+n) of the object at key with the
// semantics of RangeReader.GetRange: through GetRange when b is a
// RangeReader, otherwise by a Get whose body it cuts (copying the range,
// so the rest of the object is not kept alive).
func ReadRange(ctx context.Context, b Bucket, key string, off, n int64) (Object, error) {
	if rr, ok := b.(RangeReader); ok {
		return rr.GetRange(ctx, key, off, n)
	}
	if err := ValidateRange(off, n); err != nil {
		return Object{}, fmt.Errorf("read range of %q: %w", key, err)
	}
	obj, err := b.Get(ctx, key)
	if err != nil {
		return Object{}, err
	}
	return Object{Body: CopyRange(obj.Body, off, n), ETag: obj.ETag}, nil
}

// RangeOf is the span [lo, hi) that a range read of n bytes from off
// gives of an object of size bytes: the range, cut at the object's end.
func RangeOf(off, n, size int64) (lo, hi int64) {
	lo = min(off, size)
	return lo, lo + min(n, size-lo)
}

// CopyRange is what a range read of n bytes from off gives of body (see
// RangeOf), copied, so that the rest of body is not kept alive; never
// nil, as a range past the end is an empty body.
func CopyRange(body []byte, off, n int64) []byte {
	lo, hi := RangeOf(off, n, int64(len(body)))
	return append(make([]byte, 0, hi-lo), body[lo:hi]...)
}

// Sentinels callers branch on. Stores wrap them with context (%w).
var (
	// ErrNotFound: the key holds no object.
	ErrNotFound = errors.New("not found")
	// ErrPrecondition: the store refused the write because its condition did
	// not hold (HTTP 412, 409 ConditionalRequestConflict, 404 on If-Match).
	// Nothing was written by this request.
	ErrPrecondition = errors.New("precondition refused")
	// ErrUnknownOutcome: no answer (timeout, reset connection, 5xx). For a
	// write, it may have landed, or may still land later; only a fresh read
	// can tell. For a read, nothing is known.
	ErrUnknownOutcome = errors.New("outcome unknown")
	// ErrInvalidKey: the key cannot be stored (empty, over MaxKeyLen bytes,
	// not UTF-8). Nothing was sent.
	ErrInvalidKey = errors.New("invalid key")
	// ErrDamaged: the store holds an object under the key, but the object
	// is damaged: its bytes fail the store's checksum, or what they hold
	// cannot be decoded (ErrUnreadable is one kind of it). No crash leaves
	// that, and no retry cures it: the object stays damaged until a person
	// restores it. Other keys are not affected. A Get reports it; readers
	// that decode what they got report it as well.
	ErrDamaged = errors.New("damaged object")
	// ErrBucketDamaged: the store as a whole was found damaged while it
	// ran (the directory store found its segment cut short or gone), so
	// none of its answers can be trusted any more, for any key. A node
	// that meets it stops acting and exits, as after a lost lease.
	ErrBucketDamaged = errors.New("bucket damaged")
)

// MaxKeyLen is the longest key, in bytes (S3's limit).
const MaxKeyLen = 1024

// DefaultListLimit is the page size of List when the caller gives none.
const DefaultListLimit = 1000

// ValidateKey reports whether a key can be stored in every store.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: %d bytes, over %d", ErrInvalidKey, len(key), MaxKeyLen)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: not UTF-8", ErrInvalidKey)
	}
	return nil
}

// Outcome classifies the result of one bucket call.
type Outcome uint8

const (
	// Landed: the call succeeded (a write took effect, a read found the object).
	Landed Outcome = iota
	// NotFound: the key holds no object.
	NotFound
	// Refused: a conditional write was refused; nothing was written.
	Refused
	// Unknown: no answer; a write may have landed or may still land.
	Unknown
	// Failed: any other error (bad request, denied, invalid key). Nothing was
	// written by this request.
	Failed
	// Damaged: a read found the object damaged (ErrDamaged); asking again
	// gives the same answer until it is restored.
	Damaged
	// BucketDamaged: the store cannot be trusted any more (ErrBucketDamaged).
	BucketDamaged
)

func (o Outcome) String() string {
	switch o {
	case Landed:
		return "landed"
	case NotFound:
		return "not_found"
	case Refused:
		return "refused"
	case Unknown:
		return "unknown"
	case Failed:
		return "failed"
	case Damaged:
		return "damaged"
	case BucketDamaged:
		return "bucket_damaged"
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// OutcomeOf classifies an error returned by a Bucket.
func OutcomeOf(err error) Outcome {
	switch {
	case err == nil:
		return Landed
	case errors.Is(err, ErrBucketDamaged):
		// First: the damage of the whole store says more than whatever the
		// call would have been.
		return BucketDamaged
	case errors.Is(err, ErrDamaged):
		return Damaged
	case errors.Is(err, ErrNotFound):
		return NotFound
	case errors.Is(err, ErrPrecondition):
		return Refused
	case errors.Is(err, ErrUnknownOutcome):
		return Unknown
	}
	return Failed
}
