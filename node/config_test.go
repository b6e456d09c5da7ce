package node_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/ingress"
	"github.com/wasmkeep/wasmkeep/node"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
	"github.com/wasmkeep/wasmkeep/peer"
	"github.com/wasmkeep/wasmkeep/sockets"
)

// TestConfigValidate: a node's configuration is refused before anything
// starts when a part's bound is wrong, a part's wiring is set by the
// caller, or what is required is missing, each named; and Start closes the
// listener it was given.
func TestConfigValidate(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	good := func() node.Config {
		c := node.Config{Core: ownership.DefaultConfig("n1", "i1"), Bucket: memstore.New(memstore.Faults{}), Listener: lis}
		c.Core.Addr = "127.0.0.1:1"
		return c
	}
	if err := good().Validate(); err != nil {
		t.Fatalf("a good configuration: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*node.Config)
		want string
	}{
		{"no bucket", func(c *node.Config) { c.Bucket = nil }, "bucket and a listener are required"},
		{"bad lease", func(c *node.Config) { c.Core.Safety = c.Core.LeaseTTL }, "safety"},
		{"actors bound", func(c *node.Config) { c.Actors.IdleTimeout = -time.Second }, "must not be negative"},
		{"actors wiring", func(c *node.Config) { c.Actors.Registry = actors.BuiltIn() }, "actors: the wiring"},
		{"sockets bound", func(c *node.Config) { c.Sockets.PongTimeout, c.Sockets.PingInterval = time.Minute, time.Second }, "pong timeout"},
		{"sockets wiring", func(c *node.Config) { c.Sockets.Failed = func(ownership.Actor, string) {} }, "sockets: the wiring"},
		{"http bound", func(c *node.Config) { c.HTTP.ClusterKey = []byte("short") }, "cluster key of 5 bytes"},
		{"http wiring", func(c *node.Config) { c.HTTP.Node = "n2" }, "http: the wiring"},
		{"peers bound", func(c *node.Config) { c.Peers.PeerConns = -1 }, "peer connections -1"},
		{"peers wiring", func(c *node.Config) { c.Peers.MaxBody = 10 }, "peers: the node"},
	} {
		c := good()
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate = %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	c := good()
	c.HTTP = ingress.Config{MaxBody: -1}
	c.Peers = peer.Config{}
	c.Sockets = sockets.Config{}
	if _, err := node.Start(t.Context(), c); err == nil {
		t.Fatal("Start with a negative body bound started")
	}
	if c, err := net.Dial("tcp", lis.Addr().String()); err == nil {
		c.Close()
		t.Error("Start refused the configuration and left the listener open")
	}
}
