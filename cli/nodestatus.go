package cli

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/wasmkeep/wasmkeep/internal/certfile"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/cluster"
	"github.com/wasmkeep/wasmkeep/peer"
)

// nodeNow is what a node's own status page says it holds now, where its
// lease says what it held at its last write (up to a lease period ago).
type nodeNow struct {
	Held       int  `json:"held"`
	Parked     int  `json:"parked"`
	Pending    int  `json:"pending"`
	Sockets    int  `json:"sockets"`
	Draining   bool `json:"draining"`
	DrainStuck bool `json:"drain_stuck"`
	// Deploys: the deployed classes the node serves, and the versions
	// it could not compile.
	Deploys []struct {
		Class   string `json:"class"`
		Version string `json:"version"`
		Failed  string `json:"failed"`
	} `json:"deploys"`
	// Err says why the page was not read ("" when it was).
	Err string `json:"error,omitempty"`
}

// statusFetchTimeout bounds the read of one node's status page.
const statusFetchTimeout = 2 * time.Second

// fetchNodeStatus reads node's status page at addr, signed with key (the
// node serves it on its public listener to a signed request only; without
// a key, only a node started with --public-admin answers).
func fetchNodeStatus(ctx context.Context, addr string, node ownership.NodeID, key []byte) (nodeNow, error) {
	return fetchNodeStatusWith(ctx, http.DefaultClient, "http", addr, node, key)
}

// tlsStatusFetch reads the status pages of nodes that serve TLS, their
// certificates checked against the cluster's CA (--peer-ca).
func tlsStatusFetch(caFile string) (func(ctx context.Context, addr string, node ownership.NodeID, key []byte) (nodeNow, error), error) {
	pool, err := certfile.Pool(caFile)
	if err != nil {
		return nil, fmt.Errorf("--peer-ca: %w", err)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	return func(ctx context.Context, addr string, node ownership.NodeID, key []byte) (nodeNow, error) {
		return fetchNodeStatusWith(ctx, c, "https", addr, node, key)
	}, nil
}

func fetchNodeStatusWith(ctx context.Context, client *http.Client, scheme, addr string, node ownership.NodeID, key []byte) (nodeNow, error) {
	ctx, cancel := context.WithTimeout(ctx, statusFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+addr+"/status?format=json", nil)
	if err != nil {
		return nodeNow{}, err
	}
	req.Header.Set("Accept", "application/json")
	if len(key) > 0 {
		peer.SignStatusRequest(req, node, key)
	}
	res, err := client.Do(req)
	if err != nil {
		return nodeNow{}, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return nodeNow{}, err
	}
	if res.StatusCode != http.StatusOK {
		hint := ""
		if len(key) == 0 && (res.StatusCode == http.StatusNotFound || res.StatusCode == http.StatusUnauthorized) {
			hint = " (give the cluster key with --cluster-key-file or $" + clusterKeyEnv + ")"
		}
		return nodeNow{}, fmt.Errorf("status page answered %s%s", res.Status, hint)
	}
	var page struct {
		Node string `json:"node"`
		nodeNow
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return nodeNow{}, fmt.Errorf("status page: %w", err)
	}
	if page.Node != string(node) {
		return nodeNow{}, fmt.Errorf("the status page at %s is node %q's", addr, page.Node)
	}
	return page.nodeNow, nil
}

// readNodesNow reads the status page of every node whose lease says it
// serves (live or draining, at an address), at once.
func readNodesNow(ctx context.Context, e env, st cluster.Status, key []byte) map[ownership.NodeID]nodeNow {
	fetch := e.fetchStatus
	if fetch == nil {
		fetch = fetchNodeStatus
	}
	out := map[ownership.NodeID]nodeNow{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range st.Nodes {
		l := n.Lease
		if l == nil || l.Addr == "" || (l.State != ownership.LeaseLive && l.State != ownership.LeaseDraining) {
			continue
		}
		wg.Go(func() {
			now, err := fetch(ctx, l.Addr, n.Node, key)
			if err != nil {
				now = nodeNow{Err: err.Error()}
			}
			mu.Lock()
			out[n.Node] = now
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}
