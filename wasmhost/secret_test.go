package wasmhost

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/internal/testlog"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/keeper"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// mapSecrets stands in for the node's opened secrets.
type mapSecrets map[string]string

func (s mapSecrets) Secret(name string) ([]byte, bool) {
	v, ok := s[name]
	return []byte(v), ok
}

// TestGuestSecret: a wasm actor reads a secret the node has, and is told
// it has none for a name the node lacks, an empty name and one over 128
// bytes (no ABI violation: its guest serves on); nothing the host or the
// node logs holds the value.
func TestGuestSecret(t *testing.T) {
	const value = "sk-live-5ecr3t-a8f1"
	var log testlog.Log
	logger := slog.New(&log)
	reg := probeRegistry(t, Config{Logger: logger})
	ctx := context.Background()
	h, err := actorhost.New(actorhost.Config{Keeper: anyKeeper{}, Bucket: memstore.New(memstore.Faults{}), Registry: reg,
		System: keeper.NewSystem(nil), Logger: logger, Secrets: mapSecrets{"api-key": value}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.HibernateAll(ctx) }()
	a := ownership.Actor{Class: "probe", Name: "a"}
	long := strings.Repeat("k", 129)
	resp, err := h.Deliver(t.Context(), a, 1, post("/secret", "", strings.Join([]string{"api-key", "nope", "", long}, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	want := "api-key=" + value + "\nnope -\n -\n" + long + " -\n"
	if got := string(resp.Body); resp.Status != http.StatusOK || got != want {
		t.Fatalf("secret = %d %q, want 200 %q", resp.Status, got, want)
	}
	resp, err = h.Deliver(t.Context(), a, 1, get("/events", ""))
	if err != nil || string(resp.Body) != "2" {
		t.Fatalf("events after the secrets: %v %v; want 2 on one guest", resp, err)
	}
	if !log.Has("reading secret api-key", "guest=true") {
		t.Fatalf("the guest's log line is not in the log:\n%s", log.String())
	}
	if strings.Contains(log.String(), value) {
		t.Fatalf("the log holds the secret's value:\n%s", log.String())
	}
}
