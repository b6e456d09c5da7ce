// Package certfile serves a TLS certificate kept in two files (a PEM
// certificate chain and its key), read again when either file changes, so
// that a renewed certificate is served from the next handshake on without
// a restart: connections already open, and the WebSockets on them, keep the
// certificate they were made with and are not touched.
//
// A file is looked at (its size and modification time) at most once per
// second, on a handshake. A new pair that cannot be read or does not match
// is logged, and the last good one served until the files are fixed.
package certfile

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// checkEvery bounds how often the files are looked at.
const checkEvery = time.Second

// stamp is what tells a file changed.
type stamp struct {
	size int64
	mod  time.Time
}

func stampOf(path string) (stamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return stamp{}, err
	}
	return stamp{fi.Size(), fi.ModTime()}, nil
}

// Reloader is a certificate read from files, read again when they change.
type Reloader struct {
	certFile, keyFile string
	log               *slog.Logger
	now               func() time.Time

	mu      sync.Mutex
	cert    *tls.Certificate
	stamps  [2]stamp
	checked time.Time
	loads   int
}

// New reads the pair now: an error if it cannot be read or does not match.
func New(certFile, keyFile string, log *slog.Logger) (*Reloader, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Reloader{certFile: certFile, keyFile: keyFile, log: log, now: time.Now}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

// load reads the pair and keeps it with the files' stamps.
func (r *Reloader) load() error {
	cs, err1 := stampOf(r.certFile)
	ks, err2 := stampOf(r.keyFile)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("TLS certificate: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("TLS certificate %s with key %s: %w", r.certFile, r.keyFile, err)
	}
	if cert.Leaf == nil && len(cert.Certificate) > 0 {
		cert.Leaf, _ = x509.ParseCertificate(cert.Certificate[0])
	}
	r.mu.Lock()
	r.cert, r.stamps, r.checked = &cert, [2]stamp{cs, ks}, r.now()
	r.loads++
	r.mu.Unlock()
	return nil
}

// Loads counts the times a pair was read (1 after New).
func (r *Reloader) Loads() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.loads
}

// Certificate returns the pair to serve, reading the files again first if
// they changed since they were last read (looked at once a second at
// most).
func (r *Reloader) Certificate() *tls.Certificate {
	r.mu.Lock()
	now := r.now()
	if now.Sub(r.checked) < checkEvery {
		c := r.cert
		r.mu.Unlock()
		return c
	}
	r.checked = now
	old, stamps := r.cert, r.stamps
	r.mu.Unlock()
	cs, err1 := stampOf(r.certFile)
	ks, err2 := stampOf(r.keyFile)
	if err1 != nil || err2 != nil || (cs == stamps[0] && ks == stamps[1]) {
		return old // unchanged, or being replaced: the last good one
	}
	if err := r.load(); err != nil {
		r.log.Error("renewed TLS certificate not served: the last good one is", slog.Any("err", err))
		r.mu.Lock()
		r.stamps = [2]stamp{cs, ks} // not tried again until the files change again
		r.mu.Unlock()
		return old
	}
	r.mu.Lock()
	c := r.cert
	r.mu.Unlock()
	if c.Leaf != nil {
		r.log.Info("TLS certificate read again", slog.String("cert", r.certFile), slog.Time("not_after", c.Leaf.NotAfter))
	}
	return c
}

// ServerConfig is a server's TLS configuration serving the pair: HTTP/1.1
// only (a WebSocket upgrade takes the connection, which HTTP/2 cannot
// hand over), TLS 1.2 at least.
func (r *Reloader) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return r.Certificate(), nil
		},
	}
}

// Pool reads a PEM file of CA certificates.
func Pool(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s: no PEM certificate in it", path)
	}
	return p, nil
}
