// Package deploys keeps the wasm classes deployed through the bucket:
// each version of a class's module, named by its hash, and the class's
// record of which version is current and of the deploys before.
//
// Layout:
//
//	deploys/current/<class>            the class's record (JSON): its current
//	                                   version, whether residents switch at
//	                                   once, and its history
//	deploys/modules/<class>/<hash>     a version's module (content-addressed)
//
// A node learns of deploys by listing deploys/current/ (one request, the
// ETags telling which records changed) and reading a record only when its
// ETag changed, a module only when it has not compiled that version: what a
// node asks of the bucket for deploys does not grow with its actors. A
// record is written with If-Match on the version read, so two deploys of
// one class never lose one another's history.
package deploys

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Keys of the bucket.
const (
	CurrentPrefix = "deploys/current/"
	modulePrefix  = "deploys/modules/"
)

// FrontName is the name a deployed front (wasmkeep deploy --front) is kept
// under, as if it were a class: no class can be named so.
const FrontName = "~front"

// MaxHistory bounds the deploys a record remembers.
const MaxHistory = 100

// Errors callers branch on (errors.Is).
var (
	ErrNoClass   = errors.New("class never deployed")
	ErrNoVersion = errors.New("no such version of the class")
	ErrContended = errors.New("the class's record changed meanwhile: another deploy")
)

// Deploy is one deploy, rollback or switch of a class.
type Deploy struct {
	Version string    `json:"version"`
	At      time.Time `json:"at"`
	By      string    `json:"by,omitempty"`
	Size    int       `json:"size"`
	// Now: the class's resident actors switch at their next event,
	// not at their next hibernation.
	Now bool `json:"now,omitempty"`
	// Rollback: a rollback to an earlier version.
	Rollback bool `json:"rollback,omitempty"`
}

// Record is a class's record: its deploys, the last of them current.
type Record struct {
	Class   string   `json:"class"`
	History []Deploy `json:"history"`
}

// Current is the deploy that stands.
func (r *Record) Current() Deploy { return r.History[len(r.History)-1] }

// Version is the hash that names a module.
func Version(module []byte) string {
	h := sha256.Sum256(module)
	return hex.EncodeToString(h[:16])
}

// ModuleKey is where version of class is kept.
func ModuleKey(class, version string) string { return modulePrefix + class + "/" + version }

// Read reads class's record and its ETag.
func Read(ctx context.Context, b ownership.Bucket, class string) (*Record, ownership.ETag, error) {
	o, err := b.Get(ctx, CurrentPrefix+class)
	if errors.Is(err, ownership.ErrNotFound) {
		return nil, "", fmt.Errorf("class %q: %w", class, ErrNoClass)
	}
	if err != nil {
		return nil, "", err
	}
	var r Record
	if err := json.Unmarshal(o.Body, &r); err != nil || len(r.History) == 0 || r.Class != class {
		return nil, "", fmt.Errorf("class %q: record unreadable: %w", class, ownership.ErrUnreadable)
	}
	return &r, o.ETag, nil
}

// ReadModule reads version of class and checks it is what its hash says.
func ReadModule(ctx context.Context, b ownership.Bucket, class, version string) ([]byte, error) {
	o, err := b.Get(ctx, ModuleKey(class, version))
	if errors.Is(err, ownership.ErrNotFound) {
		return nil, fmt.Errorf("class %q version %s: %w", class, version, ErrNoVersion)
	}
	if err != nil {
		return nil, err
	}
	if Version(o.Body) != version {
		return nil, fmt.Errorf("class %q version %s: the module's hash is %s: %w", class, version, Version(o.Body), ownership.ErrDamaged)
	}
	return o.Body, nil
}

// Upload keeps module as a version of class (content-addressed: writing it
// again changes nothing) and makes it current. The module must have been
// checked: nodes compile what is current.
func Upload(ctx context.Context, b ownership.Bucket, class string, module []byte, d Deploy) (Deploy, error) {
	d.Version, d.Size = Version(module), len(module)
	if _, err := b.Put(ctx, ModuleKey(class, d.Version), module, ownership.Always()); err != nil {
		return d, fmt.Errorf("upload class %q version %s: %w", class, d.Version, err)
	}
	return d, appendDeploy(ctx, b, class, d)
}

// Rollback makes version (the one before the current when "") current
// again.
func Rollback(ctx context.Context, b ownership.Bucket, class, version string, d Deploy) (Deploy, error) {
	r, _, err := Read(ctx, b, class)
	if err != nil {
		return d, err
	}
	cur := r.Current().Version
	if version == "" {
		for i := len(r.History) - 2; i >= 0; i-- {
			if v := r.History[i].Version; v != cur {
				version = v
				break
			}
		}
		if version == "" {
			return d, fmt.Errorf("class %q has had one version only: nothing to roll back to", class)
		}
	}
	found := false
	for _, h := range r.History {
		if h.Version == version || strings.HasPrefix(h.Version, version) && len(version) >= 8 {
			version, d.Size, found = h.Version, h.Size, true
		}
	}
	if !found {
		return d, fmt.Errorf("class %q version %s: %w", class, version, ErrNoVersion)
	}
	if _, err := b.Get(ctx, ModuleKey(class, version)); err != nil {
		return d, fmt.Errorf("class %q version %s: %w", class, version, err)
	}
	d.Version, d.Rollback = version, true
	return d, appendDeploy(ctx, b, class, d)
}

// appendDeploy adds d to class's record, If-Match on the record read. A
// write refused for its condition means another deploy's landed: it goes
// again on top of it, as long as ctx lets it (each round one of the
// deploys under way lands, so n at once take at most n rounds; the bound
// is for a bucket that refuses every condition).
func appendDeploy(ctx context.Context, b ownership.Bucket, class string, d Deploy) error {
	for range 1000 {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, etag, err := Read(ctx, b, class)
		cond := ownership.IfMatch(etag)
		switch {
		case errors.Is(err, ErrNoClass):
			r, cond = &Record{Class: class}, ownership.IfAbsent()
		case err != nil:
			return err
		}
		r.History = append(r.History, d)
		if len(r.History) > MaxHistory {
			r.History = r.History[len(r.History)-MaxHistory:]
		}
		body, err := json.Marshal(r)
		if err != nil {
			return err
		}
		_, err = b.Put(ctx, CurrentPrefix+class, body, cond)
		if errors.Is(err, ownership.ErrPrecondition) {
			continue // another deploy landed first: on top of it
		}
		return err
	}
	return fmt.Errorf("class %q: %w", class, ErrContended)
}

// Entry is a class's record as the bucket lists it.
type Entry struct {
	Class string
	ETag  ownership.ETag
}

// List lists the deployed classes' records.
func List(ctx context.Context, b ownership.Bucket) ([]Entry, error) {
	var out []Entry
	after := ""
	for {
		page, err := b.List(ctx, CurrentPrefix, after, 0)
		if err != nil {
			return nil, err
		}
		for _, e := range page.Entries {
			out = append(out, Entry{Class: strings.TrimPrefix(e.Key, CurrentPrefix), ETag: e.ETag})
		}
		if !page.Truncated || len(page.Entries) == 0 {
			return out, nil
		}
		after = page.Entries[len(page.Entries)-1].Key
	}
}
