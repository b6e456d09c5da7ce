package cluster

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/cli"
	"github.com/wasmkeep/wasmkeep/internal/certtest"
	"github.com/wasmkeep/wasmkeep/internal/proctest"
)

// TestTLSCluster: two node processes serving HTTPS and WSS with a
// certificate of a CA the test made, reaching each other over TLS checked
// against that CA (--peer-ca): a request through the node that does not
// hold the actor is forwarded, and a WebSocket through it relayed, over
// TLS. The certificate renewed on disk is served from the next handshake,
// and the sockets open before it go on.
func TestTLSCluster(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, dir)
	cf, kf := filepath.Join(dir, "node.pem"), filepath.Join(dir, "node.key")
	ca.Issue(t, 100, cf, kf)
	bucket := t.TempDir()
	var nodes []*proctest.Node
	admin := proctest.Free(t)
	for i := range 2 {
		args := append([]string{"--node", fmt.Sprintf("n%d", i+1), "--bucket", bucket, "--listen", proctest.Free(t), "--public-admin",
			"--tls-cert", cf, "--tls-key", kf, "--peer-ca", ca.File}, lease...)
		if i == 0 {
			args = append(args, "--admin-listen", admin)
		}
		nodes = append(nodes, proctest.Start(t, proctest.Options{Args: args}))
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: ca.ClientConfig()}}
	get := func(n *proctest.Node, path string) (int, string) {
		t.Helper()
		res, err := client.Get("https://" + n.Addr + path)
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, strings.TrimSpace(string(b))
	}
	for _, n := range nodes {
		require.Eventually(t, func() bool {
			code, body := get(n, "/status?format=json")
			return code == http.StatusOK && strings.Count(body, `"live":true`) >= 1
		}, 30*time.Second, 50*time.Millisecond, "the nodes see each other")
	}
	res, err := client.Get("https://" + admin + "/debug/tree")
	require.NoError(t, err, "the admin listener serves TLS too")
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	if res, err := http.Get("http://" + nodes[0].Addr + "/healthz"); err == nil {
		res.Body.Close()
		require.Equal(t, http.StatusBadRequest, res.StatusCode, "plain HTTP is not served")
	}

	// n1 holds the counter and the room; n2 forwards and relays to it.
	code, body := get(nodes[0], "/actor/counter/c")
	require.Equal(t, "200 1", fmt.Sprint(code, " ", body))
	code, body = get(nodes[1], "/actor/counter/c")
	require.Equal(t, "200 2", fmt.Sprint(code, " ", body), "forwarded over TLS")
	code, _ = get(nodes[0], "/actor/chat/tls")
	require.Equal(t, http.StatusOK, code)
	d := websocket.Dialer{TLSClientConfig: ca.ClientConfig(), HandshakeTimeout: 10 * time.Second}
	ws, _, err := d.Dial("wss://"+nodes[1].Addr+"/actor/chat/tls", nil)
	require.NoError(t, err)
	defer ws.Close()
	echo := func(msg string) {
		t.Helper()
		require.NoError(t, ws.WriteMessage(websocket.TextMessage, []byte(msg)))
		require.NoError(t, ws.SetReadDeadline(time.Now().Add(10*time.Second)))
		_, b, err := ws.ReadMessage()
		require.NoError(t, err)
		require.Equal(t, msg, string(b))
	}
	echo("before the renewal")

	serial := func(n *proctest.Node) int64 {
		c, err := tls.Dial("tcp", n.Addr, ca.ClientConfig())
		require.NoError(t, err)
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}
	require.Equal(t, int64(100), serial(nodes[0]))
	ca.Issue(t, 101, cf, kf)
	for _, n := range nodes {
		require.Eventually(t, func() bool { return serial(n) == 101 }, 10*time.Second, 100*time.Millisecond, "the renewed certificate is served")
	}
	echo("after the renewal: the relayed socket is open still")
	code, body = get(nodes[1], "/actor/counter/c")
	require.Equal(t, "200 3", fmt.Sprint(code, " ", body))

	// cluster status reads the nodes' status pages over TLS.
	var out, errOut strings.Builder
	require.Equal(t, 0, cli.Run(t.Context(), []string{"cluster", "status", "--bucket", bucket, "--peer-ca", ca.File}, &out, &errOut), errOut.String())
	require.NotContains(t, out.String(), "not read:", out.String())
}
