package buckettest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// wantUnknownWrite checks the result of a write whose context ended: the
// outcome must be unknown. A refusal would be a lie, since the store may not
// have looked, and a caller that trusted it would give up a write that may
// still land.
func wantUnknownWrite(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ownership.ErrUnknownOutcome) || errors.Is(err, ownership.ErrPrecondition) {
		t.Errorf("%s: %v, want ErrUnknownOutcome and not ErrPrecondition", what, err)
	}
}

// wantLandedOrAbsent checks that key holds either nothing or exactly body: a
// write whose outcome is unknown may have landed, but only whole.
func wantLandedOrAbsent(t *testing.T, b ownership.Bucket, key string, body []byte) {
	t.Helper()
	obj, err := b.Get(t.Context(), key)
	switch {
	case errors.Is(err, ownership.ErrNotFound):
	case err != nil:
		t.Errorf("get %q: %v", key, err)
	case !bytes.Equal(obj.Body, body):
		t.Errorf("get %q after an unknown write: %s, want nothing or %s", key, abbrev(obj.Body), abbrev(body))
	}
}

// testContextDone: calls whose context is already done report an unknown
// outcome, whatever the condition would have said.
func testContextDone(t *testing.T, b ownership.Bucket, _ Traits) {
	existing := put(t, b, "ctx/existing", []byte("existing"), ownership.IfAbsent())

	expired, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel()
	canceled, cancel2 := context.WithCancel(t.Context())
	cancel2()

	for _, c := range []struct {
		name string
		ctx  context.Context
	}{{"expired", expired}, {"canceled", canceled}} {
		name, ctx := c.name, c.ctx
		newKey := "ctx/new-" + name
		for _, w := range []struct {
			what string
			key  string
			cond ownership.Condition
		}{
			{"create-only of a new key", newKey, ownership.IfAbsent()},
			{"create-only over an existing key", "ctx/existing", ownership.IfAbsent()},
			{"if-match with a stale ETag", "ctx/existing", ownership.IfMatch("stale")},
			{"if-match on a missing key", newKey, ownership.IfMatch(existing)},
		} {
			_, err := b.Put(ctx, w.key, []byte("late "+name), w.cond)
			wantUnknownWrite(t, fmt.Sprintf("%s context: put, %s", name, w.what), err)
		}
		_, err := b.Put(ctx, newKey+"-always", []byte("late "+name), ownership.Always())
		wantUnknownWrite(t, name+" context: unconditional put", err)
		err = b.Delete(ctx, "ctx/existing", ownership.IfMatch("stale"))
		wantUnknownWrite(t, name+" context: if-match delete with a stale ETag", err)
		err = b.Delete(ctx, newKey, ownership.IfMatch(existing))
		wantUnknownWrite(t, name+" context: if-match delete of a missing key", err)

		_, err = b.Get(ctx, "ctx/existing")
		wantOutcome(t, name+" context: get", err, ownership.Unknown)
		_, err = b.List(ctx, "ctx/", "", 0)
		wantOutcome(t, name+" context: list", err, ownership.Unknown)

		// Whatever happened, nothing the conditions forbid happened.
		wantLandedOrAbsent(t, b, newKey, []byte("late "+name))
		wantLandedOrAbsent(t, b, newKey+"-always", []byte("late "+name))
	}
	wantObject(t, b, "ctx/existing", []byte("existing"), existing)
}

// testDeadlineMidCall: a deadline that expires while a write is in flight
// yields landed or unknown, never refused; and what is stored afterwards is
// either nothing or the whole write. When the bucket is a Holder, writes are
// held until their deadline has certainly passed, and the outcome must be
// unknown.
func testDeadlineMidCall(t *testing.T, b ownership.Bucket, _ Traits) {
	body := randomBytes(1 << 20)
	for i, timeout := range []time.Duration{50 * time.Microsecond, 200 * time.Microsecond, time.Millisecond, 5 * time.Millisecond} {
		key := fmt.Sprintf("mid/%d", i)
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		etag, err := b.Put(ctx, key, body, ownership.IfAbsent())
		cancel()
		switch o := ownership.OutcomeOf(err); o {
		case ownership.Landed:
			wantObject(t, b, key, body, etag)
		case ownership.Unknown:
			wantLandedOrAbsent(t, b, key, body)
		default:
			t.Errorf("create-only put with a %v deadline: %v (%v), want landed or unknown", timeout, o, err)
		}
	}

	h, ok := b.(Holder)
	if !ok {
		return
	}
	existing := put(t, b, "held/existing", []byte("existing"), ownership.IfAbsent())
	release := h.HoldWrites(t)
	released := false
	defer func() {
		if !released {
			release()
		}
	}()
	held := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(t.Context(), 20*time.Millisecond)
	}
	ctx, cancel := held()
	_, err := b.Put(ctx, "held/new", []byte("held"), ownership.IfAbsent())
	cancel()
	wantUnknownWrite(t, "held create-only put of a new key", err)
	ctx, cancel = held()
	_, err = b.Put(ctx, "held/existing", []byte("held"), ownership.IfAbsent())
	cancel()
	wantUnknownWrite(t, "held create-only put over an existing key", err)
	ctx, cancel = held()
	err = b.Delete(ctx, "held/existing", ownership.IfMatch("stale"))
	cancel()
	wantUnknownWrite(t, "held if-match delete with a stale ETag", err)
	released = true
	release()

	wantLandedOrAbsent(t, b, "held/new", []byte("held"))
	wantObject(t, b, "held/existing", []byte("existing"), existing)
	// The store is usable again once writes are released.
	put(t, b, "held/after", []byte("after"), ownership.IfAbsent())
}
