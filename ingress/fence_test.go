package ingress_test

import (
	"net/http"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership/cluster"
	"github.com/wasmkeep/wasmkeep/ownership/dirstore"
)

// TestFencedNodeEnds: a node fenced while it holds an actor ends with an
// error at its next renewal and serves nothing more; a peer acquires the
// actor at a new generation (its seal stamps the state), and the count
// goes on from what the fenced node committed.
func TestFencedNodeEnds(t *testing.T) {
	dir := t.TempDir()
	n1 := startTestNode(t, dir, "n1", "i1")
	n1.mustGet(t, "/actor/counter/a", "1")
	n1.mustGet(t, "/actor/counter/a", "2")

	b, err := dirstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := cluster.Fence(t.Context(), b, "n1", "test-fence"); err != nil {
		t.Fatal(err)
	}
	<-n1.Done() // at its next renewal
	if n1.Err() == nil {
		t.Fatal("fenced node ended without an error")
	}
	if status, _ := n1.get(t, "/readyz", nil); status != http.StatusServiceUnavailable {
		t.Fatalf("fenced node's /readyz: %d", status)
	}
	if status, _ := n1.get(t, "/actor/counter/a", nil); status != http.StatusServiceUnavailable {
		t.Fatalf("fenced node served: %d", status)
	}
	n1.Abort()

	// A peer that starts now reads n1's lease when it finds the record
	// naming n1, sees the fence, and acquires.
	n2 := startTestNode(t, dir, "n2", "i2")
	n2.mustGet(t, "/actor/counter/a", "3")
	if r := readRecord(t, dir, counterA); r.Node != "n2" || r.Generation != 2 {
		t.Fatalf("record %+v, want held by n2 at generation 2", r)
	}
	if status, _ := n2.get(t, "/readyz", nil); status != http.StatusOK {
		t.Fatalf("n2 /readyz: %d", status)
	}
}
