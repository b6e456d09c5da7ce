package ingress

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Requests between nodes (a forwarded request or upgrade, a forwarded
// call) carry headers a client must not be able to set: who forwarded it,
// and the call chain. With a cluster key, the node that forwards signs the
// request with it (SignatureHeader), and a node takes those headers only
// from a request whose signature checks; one that carries them unsigned,
// or signed with another key or too long ago, is refused (401). Without a
// key, nodes trust them from anyone who reaches their port: run such nodes
// on loopback or a private network.

// SignatureHeader carries a peer request's signature: "v1", the signing
// time in Unix milliseconds, and the HMAC-SHA256 of the request under the
// cluster key (base64url), separated by commas.
const SignatureHeader = "Wasmkeep-Signature"

// MinClusterKey is the shortest cluster key accepted, in bytes.
const MinClusterKey = 16

// SignatureWindow is how far a signature's time may lie from the receiving
// node's clock, either way.
const SignatureWindow = time.Minute

// errUnsigned: a request carries peer headers but no valid signature.
var errUnsigned = errors.New("peer request without a valid cluster signature")

// peerHeaders are the headers only a peer may send.
var peerHeaders = []string{ForwardedHeader, CallChainHeader, SignatureHeader}

// isPeerRequest says whether r carries any header only a peer may send.
func isPeerRequest(r *http.Request) bool {
	for _, h := range peerHeaders {
		if _, ok := r.Header[h]; ok {
			return true
		}
	}
	return false
}

// signRequest signs r, whose body is body, with key at now.
func signRequest(r *http.Request, body []byte, key []byte, now time.Time) {
	ts := strconv.FormatInt(now.UnixMilli(), 10)
	mac := peerMAC(key, ts, r, body)
	r.Header.Set(SignatureHeader, "v1,"+ts+","+base64.RawURLEncoding.EncodeToString(mac))
}

// verifyRequest checks r's signature under key at now.
func verifyRequest(r *http.Request, body []byte, key []byte, now time.Time) error {
	v, ts, sig, ok := splitSignature(r.Header.Get(SignatureHeader))
	if !ok || v != "v1" {
		return errUnsigned
	}
	ms, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errUnsigned
	}
	if d := now.Sub(time.UnixMilli(ms)); d > SignatureWindow || d < -SignatureWindow {
		return fmt.Errorf("%w: signed %v away from this node's clock, over %v", errUnsigned, d.Round(time.Second), SignatureWindow)
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, peerMAC(key, ts, r, body)) {
		return errUnsigned
	}
	return nil
}

func splitSignature(s string) (v, ts, sig string, ok bool) {
	v, rest, ok1 := strings.Cut(s, ",")
	ts, sig, ok2 := strings.Cut(rest, ",")
	return v, ts, sig, ok1 && ok2
}

// peerMAC is the MAC of what a peer request says: method, host-free
// escaped path and query, the peer headers, and the body's hash.
func peerMAC(key []byte, ts string, r *http.Request, body []byte) []byte {
	sum := sha256.Sum256(body)
	m := hmac.New(sha256.New, key)
	for _, part := range []string{"v1", ts, r.Method, r.URL.EscapedPath(), r.URL.RawQuery,
		r.Header.Get(ForwardedHeader), r.Header.Get(CallChainHeader), hex.EncodeToString(sum[:])} {
		m.Write([]byte(part))
		m.Write([]byte{'\n'})
	}
	return m.Sum(nil)
}
