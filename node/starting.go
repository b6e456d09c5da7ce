package node

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/wasmkeep/wasmkeep/peer"
)

// While a node waits for its lease (a crashed start of the same node may
// hold it until it lapses, ttl plus grace), its port answers rather than
// staying closed: /healthz 200 (the process is up), /readyz 503 (no lease
// yet), anything else 503 with Retry-After. Balancers and operators see a
// live process that is not ready, and why. The node's own server takes the
// listener once the lease is taken.

// startingServer serves lis until stop is called, which returns once no
// request of it is left; lis stays open for the node's server.
func startingServer(lis net.Listener, log *slog.Logger) (stop func()) {
	tl, ok := lis.(*net.TCPListener)
	if !ok {
		return func() {} // no way to take the listener back: the port waits
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "ok", http.StatusOK)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		w.Header().Set(peer.NotRunHeader, "1") // nothing runs before the lease
		w.Header().Set("Connection", "close")
		http.Error(w, "node starting: waiting for its lease", http.StatusServiceUnavailable)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(keepOpen{tl})
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			_ = srv.Close()
		}
		<-done
		_ = tl.SetDeadline(time.Time{})
	}
}

// keepOpen is a listener whose Close only wakes Accept (a deadline in the
// past), so that a server's Shutdown hands the socket back open.
type keepOpen struct{ *net.TCPListener }

func (k keepOpen) Close() error { return k.SetDeadline(time.Unix(1, 0)) }
