package actors

import (
	"context"
	"errors"
	"fmt"
)

// Secrets. An application's secrets (API keys, tokens) are kept in the
// bucket sealed to the cluster's recipients (wasmkeep secrets set NAME); a
// node opens them with its identity, and a class or a front reads them
// with Secret. A secret's value never appears in the node's logs, metrics,
// errors or status page; keep it out of the class's own too.

// ErrNoSecret: the node has no secret of that name (none set, or it
// cannot open it: it then drains).
var ErrNoSecret = errors.New("no such secret on this node")

// Secret returns the secret name, a copy the caller may keep. ctx must be
// an event's or a front's.
func Secret(ctx context.Context, name string) ([]byte, error) {
	ev := eventOf(ctx)
	if ev == nil {
		return nil, ErrNotInEvent
	}
	v, ok := ev.Secret(name)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNoSecret, name)
	}
	return v, nil
}
