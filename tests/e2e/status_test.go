package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/internal/browser"
	"github.com/wasmkeep/wasmkeep/internal/nodetest"
)

// TestStatusPageInBrowser: the status page of a node of a two-node
// cluster, in headless Chromium, names the node, its valid lease, its peer
// (live) and its supervision tree, and loads nothing from elsewhere.
func TestStatusPageInBrowser(t *testing.T) {
	chromium := browser.Require(t)
	dir := t.TempDir()
	n1 := nodetest.Start(t, nodetest.Options{Dir: dir, Node: "n1", Instance: "i1"})
	n2 := nodetest.Start(t, nodetest.Options{Dir: dir, Node: "n2", Instance: "i2"})
	require.Eventually(t, func() bool {
		for _, p := range n1.Status().Peers {
			if p.Node == "n2" && p.Live {
				return true
			}
		}
		return false
	}, nodetest.Wait, 10*time.Millisecond, "n1 sees n2 live")
	_ = n2

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	bctx, stop, err := browser.Launch(ctx, chromium, t.Logf)
	require.NoError(t, err)
	defer stop()
	tab, _ := chromedp.NewContext(bctx)
	require.NoError(t, chromedp.Do(tab, chromedp.Navigate(n1.URL+"/status")))
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(tab, chromedp.Text(sel))
		require.NoError(t, err, sel)
		return s
	}
	title, lease, peer, tree := text("h1"), text("p"), text("#peers"), text("#tree")
	external, err := chromedp.Run(tab, chromedp.Evaluate[int](`document.querySelectorAll('link[href],script[src],img[src],iframe').length`))
	require.NoError(t, err)
	require.Equal(t, "Node n1", title)
	require.Contains(t, lease, "lease valid")
	require.Contains(t, peer, "n2")
	require.Contains(t, peer, "live")
	for _, want := range []string{"keeper", "director", "sweeper", "drainer", "mover"} {
		require.Contains(t, tree, want)
	}
	require.Zero(t, external, "the page loads nothing from elsewhere")
}
