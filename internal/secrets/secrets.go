// Package secrets keeps an application's secrets (API keys, tokens) in the
// bucket, each sealed with age (filippo.io/age) to the cluster's
// recipients, so that nothing in the bucket reads them: a node opens them
// with an identity given to it by a file or the environment, never stored
// in the bucket.
//
// Layout:
//
//	secrets/recipients       the cluster's age recipients, one per line (plain)
//	secrets/v/<name>         a secret: a header line naming the recipients it
//	                         was sealed to (a hash of the list), then the age file
//
// Rotation: a recipient is added (every secret sealed again to the list with
// it, which needs an identity that opens them), the nodes are given its
// identity, then the old recipient is removed (every secret sealed again
// without it). No node is unable to open the secrets in between.
//
// A secret's value never goes into an error, a log line or a metric of this
// package: errors name secrets, never their values.
package secrets

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	"filippo.io/age"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Keys of the bucket.
const (
	Prefix        = "secrets/"
	recipientsKey = Prefix + "recipients"
	valuePrefix   = Prefix + "v/"
	header        = "wasmkeep-secret 1 recipients "
)

// Limits.
const (
	MaxName  = 128
	MaxValue = 64 << 10
	// MaxSecrets bounds the secrets a node opens and keeps in memory.
	MaxSecrets = 1000
)

// Errors callers branch on (errors.Is).
var (
	// ErrNoRecipients: the bucket names no recipient to seal to.
	ErrNoRecipients = errors.New("no secrets recipient: add one with 'wasmkeep secrets recipients add'")
	// ErrCannotOpen: a secret is not sealed to any identity given.
	ErrCannotOpen = errors.New("secret cannot be opened with this identity")
	// ErrNotFound: no secret of that name.
	ErrNotFound = errors.New("no such secret")
	// ErrBadName: a name that is empty, too long, not UTF-8, or has a
	// slash or a control character.
	ErrBadName = errors.New("bad secret name")
)

// CheckName checks a secret's name.
func CheckName(name string) error {
	switch {
	case name == "" || len(name) > MaxName:
		return fmt.Errorf("%w: %d bytes: want 1 to %d", ErrBadName, len(name), MaxName)
	case !utf8.ValidString(name) || strings.ContainsAny(name, "/\\") || name == "." || name == "..":
		return fmt.Errorf("%w: %q", ErrBadName, name)
	case strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fmt.Errorf("%w: %q has a control character", ErrBadName, name)
	}
	return nil
}

// Recipients reads the cluster's recipients and the hash that names the
// list.
func Recipients(ctx context.Context, b ownership.Bucket) ([]string, string, error) {
	o, err := b.Get(ctx, recipientsKey)
	if errors.Is(err, ownership.ErrNotFound) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("read the secrets recipients: %w", err)
	}
	var out []string
	for l := range strings.SplitSeq(string(o.Body), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out, listHash(out), nil
}

func listHash(rs []string) string {
	s := slices.Clone(rs)
	slices.Sort(s)
	h := sha256.Sum256([]byte(strings.Join(s, "\n")))
	return hex.EncodeToString(h[:8])
}

func parseRecipients(rs []string) ([]age.Recipient, error) {
	if len(rs) == 0 {
		return nil, ErrNoRecipients
	}
	out := make([]age.Recipient, 0, len(rs))
	for _, r := range rs {
		p, err := age.ParseRecipients(strings.NewReader(r))
		if err != nil {
			return nil, fmt.Errorf("recipient %q: %w", r, err)
		}
		out = append(out, p...)
	}
	return out, nil
}

// seal seals value to rs, with its header.
func seal(rs []string, value []byte) ([]byte, error) {
	recips, err := parseRecipients(rs)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.WriteString(header + listHash(rs) + "\n")
	w, err := age.Encrypt(&buf, recips...)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(value); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// open opens a sealed secret with ids; it returns the recipients' hash it
// was sealed for.
func open(body []byte, ids []age.Identity) (value []byte, sealedFor string, err error) {
	line, rest, ok := bytes.Cut(body, []byte("\n"))
	if !ok || !bytes.HasPrefix(line, []byte(header)) {
		return nil, "", errors.New("not a sealed secret")
	}
	sealedFor = string(line[len(header):])
	if len(ids) == 0 {
		return nil, sealedFor, ErrCannotOpen
	}
	r, err := age.Decrypt(bytes.NewReader(rest), ids...)
	if err != nil {
		var nm *age.NoIdentityMatchError
		if errors.As(err, &nm) {
			return nil, sealedFor, ErrCannotOpen
		}
		return nil, sealedFor, fmt.Errorf("damaged: %w", err)
	}
	v, err := io.ReadAll(io.LimitReader(r, MaxValue+1))
	if err != nil {
		return nil, sealedFor, fmt.Errorf("damaged: %w", err)
	}
	return v, sealedFor, nil
}

// Set seals value to the cluster's recipients and keeps it as name.
func Set(ctx context.Context, b ownership.Bucket, name string, value []byte) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if len(value) > MaxValue {
		return fmt.Errorf("secret %q: %d bytes, at most %d", name, len(value), MaxValue)
	}
	rs, _, err := Recipients(ctx, b)
	if err != nil {
		return err
	}
	body, err := seal(rs, value)
	if err != nil {
		return fmt.Errorf("seal secret %q: %w", name, err)
	}
	if _, err := b.Put(ctx, valuePrefix+name, body, ownership.Always()); err != nil {
		return fmt.Errorf("write secret %q: %w", name, err)
	}
	return nil
}

// Delete deletes the secret name.
func Delete(ctx context.Context, b ownership.Bucket, name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if _, err := b.Get(ctx, valuePrefix+name); errors.Is(err, ownership.ErrNotFound) {
		return fmt.Errorf("secret %q: %w", name, ErrNotFound)
	}
	return b.Delete(ctx, valuePrefix+name, ownership.Always())
}

// Entry is a secret as the bucket lists it.
type Entry struct {
	Name string
	ETag ownership.ETag
	Size int64
}

// List lists the secrets' names.
func List(ctx context.Context, b ownership.Bucket) ([]Entry, error) {
	var out []Entry
	after := ""
	for {
		page, err := b.List(ctx, valuePrefix, after, 0)
		if err != nil {
			return nil, fmt.Errorf("list secrets: %w", err)
		}
		for _, e := range page.Entries {
			out = append(out, Entry{Name: strings.TrimPrefix(e.Key, valuePrefix), ETag: e.ETag, Size: e.Size})
		}
		if !page.Truncated || len(page.Entries) == 0 {
			return out, nil
		}
		after = page.Entries[len(page.Entries)-1].Key
	}
}

// SetRecipients makes rs the cluster's recipients and seals every secret
// to them again, opening each with ids. A secret ids cannot open stops it
// (nothing is lost: the secrets sealed again so far open with the old
// identities and the new ones alike only if the old recipients are kept).
func SetRecipients(ctx context.Context, b ownership.Bucket, rs []string, ids []age.Identity) error {
	if _, err := parseRecipients(rs); err != nil {
		return err
	}
	// Every secret is opened first: one that cannot be is found before
	// anything is written.
	list, err := List(ctx, b)
	if err != nil {
		return err
	}
	values := make(map[string][]byte, len(list))
	for _, e := range list {
		o, err := b.Get(ctx, valuePrefix+e.Name)
		if errors.Is(err, ownership.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read secret %q: %w", e.Name, err)
		}
		v, _, err := open(o.Body, ids)
		if err != nil {
			return fmt.Errorf("secret %q: %w", e.Name, err)
		}
		values[e.Name] = v
	}
	body := []byte(strings.Join(rs, "\n") + "\n")
	if _, err := b.Put(ctx, recipientsKey, body, ownership.Always()); err != nil {
		return fmt.Errorf("write the secrets recipients: %w", err)
	}
	for name, v := range values {
		sealed, err := seal(rs, v)
		if err != nil {
			return fmt.Errorf("seal secret %q: %w", name, err)
		}
		if _, err := b.Put(ctx, valuePrefix+name, sealed, ownership.Always()); err != nil {
			return fmt.Errorf("write secret %q: %w", name, err)
		}
	}
	return nil
}

// ReadIdentities reads age identities from a file (an age identity file:
// one AGE-SECRET-KEY-1... per line, # comments) or, if path is "", from
// the text of env (the same format); none when both are empty.
func ReadIdentities(path, env string) ([]age.Identity, error) {
	text := env
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("secrets identity: %w", err)
		}
		text = string(b)
	}
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	ids, err := age.ParseIdentities(strings.NewReader(text))
	if err != nil {
		// age's error is not passed on: a malformed key's text must not
		// reach a log.
		return nil, errors.New("secrets identity: not an age identity file (lines of AGE-SECRET-KEY-1..., # comments)")
	}
	return ids, nil
}
