package certfile_test

import (
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/internal/certfile"
	"github.com/wasmkeep/wasmkeep/internal/certtest"
)

// TestRenewal: a renewed pair is served from the next handshake once the
// files change (looked at once a second at most); a connection made before
// keeps working; a broken renewal keeps the last good pair.
func TestRenewal(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, dir)
	cf, kf := filepath.Join(dir, "node.pem"), filepath.Join(dir, "node.key")
	ca.Issue(t, 100, cf, kf)
	r, err := certfile.New(cf, kf, nil)
	require.NoError(t, err)
	var clock atomic.Int64 // seconds past the start
	start := time.Now()
	certfile.SetClock(r, func() time.Time { return start.Add(time.Duration(clock.Load()) * time.Second) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }), ErrorLog: log.New(io.Discard, "", 0)}
	go srv.Serve(tls.NewListener(ln, r.ServerConfig()))
	defer srv.Close()

	serial := func(c *tls.Conn) int64 { return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64() }
	dial := func() *tls.Conn {
		cfg := ca.ClientConfig()
		cfg.NextProtos = []string{"h2", "http/1.1"}
		c, err := tls.Dial("tcp", ln.Addr().String(), cfg)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
	before := dial()
	require.Equal(t, int64(100), serial(before))
	require.Equal(t, "http/1.1", before.ConnectionState().NegotiatedProtocol, "never HTTP/2: an upgrade takes the connection")

	time.Sleep(10 * time.Millisecond) // a new modification time
	ca.Issue(t, 101, cf, kf)
	require.Equal(t, int64(100), serial(dial()), "the files are looked at once a second at most")
	clock.Add(2)
	require.Equal(t, int64(101), serial(dial()), "the renewal is served from the next handshake")
	require.Equal(t, 2, r.Loads())
	_, err = before.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	require.NoError(t, err)
	buf := make([]byte, 64)
	n, err := before.Read(buf)
	require.NoError(t, err)
	require.Contains(t, string(buf[:n]), "200 OK", "the connection made before goes on")

	require.NoError(t, writeFile(cf, "not a certificate"))
	clock.Add(2)
	require.Equal(t, int64(101), serial(dial()), "a broken renewal keeps the last good pair")

	_, err = certfile.New(cf, kf, nil)
	require.Error(t, err, "a pair that cannot be read is refused at the start")
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o600) }
