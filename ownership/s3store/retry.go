package s3store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// Backoff bounds between attempts of a repeatable operation.
const (
	firstBackoff = 50 * time.Millisecond
	maxBackoff   = 2 * time.Second
)

// retryPolicy runs one operation as a bounded series of attempts.
type retryPolicy struct {
	attemptTimeout time.Duration
	maxAttempts    int
	// wait sleeps for d or until ctx ends; tests replace it to run without
	// real delays.
	wait func(ctx context.Context, d time.Duration) error
}

func newRetryPolicy(attemptTimeout time.Duration, maxAttempts int) retryPolicy {
	return retryPolicy{attemptTimeout: attemptTimeout, maxAttempts: maxAttempts, wait: sleep}
}

// do runs attempt under a per-attempt timeout and maps its error. When
// repeatable, an attempt with an unknown outcome is tried again, up to
// maxAttempts in all; otherwise the first attempt is the only one.
//
// Invariant: repeatable is false for every conditional write. Sending one
// again after an unanswered attempt can be refused because the first attempt
// landed, which would report a write that won as one that lost.
func (p retryPolicy) do(ctx context.Context, o op, what string, repeatable bool, attempt func(context.Context) error) error {
	attempts := 1
	if repeatable {
		attempts = p.maxAttempts
	}
	backoff := firstBackoff
	for n := 1; ; n++ {
		err := p.once(ctx, attempt)
		if err == nil {
			return nil
		}
		v := classify(o, err)
		if v != vUnknown || n >= attempts || ctx.Err() != nil {
			if n > 1 {
				what = fmt.Sprintf("%s (attempt %d of %d)", what, n, attempts)
			}
			return wrap(v, what, err)
		}
		// Equal jitter: at least half the backoff, so attempts stay spaced,
		// plus a random half, so many nodes retrying do not stay in step.
		d := backoff/2 + rand.N(backoff/2+1)
		if werr := p.wait(ctx, d); werr != nil {
			return wrap(vUnknown, fmt.Sprintf("%s (attempt %d of %d)", what, n, attempts),
				fmt.Errorf("%w; then, waiting to retry: %w", err, werr))
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// once runs a single attempt under its own deadline.
func (p retryPolicy) once(ctx context.Context, attempt func(context.Context) error) error {
	actx, cancel := context.WithTimeout(ctx, p.attemptTimeout)
	defer cancel()
	return attempt(actx)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
