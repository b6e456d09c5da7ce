package ingress

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Requests between nodes (a forwarded request or upgrade, a forwarded
// call) carry headers a client must not be able to set: who forwarded it,
// and the call chain. With a cluster key, the node that forwards signs the
// request with it (SignatureHeader), and a node takes those headers only
// from a request whose signature checks; one that carries them unsigned,
// or signed with another key or too long ago, is refused (401). Without a
// key, nodes trust them from anyone who reaches their port: run such nodes
// on loopback or a private network.

// SignatureHeader carries a peer request's signature: "v2", the signing
// time in Unix milliseconds, a nonce (16 random bytes, base64url), the
// names of the headers signed (canonical, sorted, ';'-separated), and the
// HMAC-SHA256 of the request under the cluster key (base64url), separated
// by commas. The MAC covers the method, the escaped path and query, every
// header the forwarding node sent (values in order) but the few the HTTP
// layer itself rewrites (unsignedHeaders), and the body's hash. The node
// that takes it removes every header that was not signed before the actor
// sees the request, and remembers each nonce while its signature could be
// taken, so a request replayed within the window is refused.
const SignatureHeader = "Wasmkeep-Signature"

// MinClusterKey is the shortest cluster key accepted, in bytes.
const MinClusterKey = 16

// SignatureWindow is how far a signature's time may lie from the receiving
// node's clock, either way.
const SignatureWindow = time.Minute

// errUnsigned: a request carries peer headers but no valid signature.
var errUnsigned = errors.New("peer request without a valid cluster signature")

// errReplayed: a validly signed request whose nonce was seen before.
var errReplayed = errors.New("peer request replayed: its nonce was seen before")

// ForwardedToHeader names the node a peer request is for. It is signed
// with the rest, so a request taken off the wire cannot be played to
// another node.
const ForwardedToHeader = "Wasmkeep-Forwarded-To"

// ForwardedInstanceHeader names the instance (the start of the node
// process) a peer request is for, as the sender read it in the target's
// lease. Signed with the rest, it makes a request taken off the wire
// worthless once the target restarts: the nonces it remembers live in one
// process, and the next start refuses what was signed for the one before
// (401, marked not run: a sender that had not yet read the new lease reads
// it and sends the request again). A request without it (from a node of an
// earlier version) is taken only if signed after this process started.
const ForwardedInstanceHeader = "Wasmkeep-Forwarded-Instance"

// peerHeaders are the headers only a peer may send.
var peerHeaders = []string{ForwardedHeader, ForwardedToHeader, ForwardedInstanceHeader, CallChainHeader, SignatureHeader, EventKeyHeader}

// errOtherInstance: a peer request signed for another start of this node.
var errOtherInstance = errors.New("peer request signed for another start of this node")

// setInstance names the instance a peer request is for, when known.
func setInstance(h http.Header, inst ownership.InstanceID) {
	if inst != "" {
		h.Set(ForwardedInstanceHeader, string(inst))
	}
}

// unsignedHeaders are left out of the MAC, and kept when unsigned: the
// HTTP layer sets them from the body and the connection, not the sender.
var unsignedHeaders = map[string]bool{"Content-Length": true, "Transfer-Encoding": true, SignatureHeader: true}

// isPeerRequest says whether r carries any header only a peer may send.
func isPeerRequest(r *http.Request) bool {
	for _, h := range peerHeaders {
		if _, ok := r.Header[h]; ok {
			return true
		}
	}
	return false
}

// signRequest signs r, whose body is body, with key at now: every header
// r has now is signed, so it is called once r's headers are final. The
// headers are first put in the form the wire gives them (canonical
// names, values trimmed; Host, Trailer and an empty User-Agent are not
// sent as headers), so what the receiver reads is what was signed.
func signRequest(r *http.Request, body []byte, key []byte, now time.Time) {
	wireHeaders(r.Header)
	var nonce [16]byte
	rand.Read(nonce[:])
	ts := strconv.FormatInt(now.UnixMilli(), 10)
	n := base64.RawURLEncoding.EncodeToString(nonce[:])
	var names []string
	for name := range r.Header {
		if !unsignedHeaders[name] {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	mac := peerMAC(key, ts, n, names, r, body)
	r.Header.Set(SignatureHeader, "v2,"+ts+","+n+","+strings.Join(names, ";")+","+base64.RawURLEncoding.EncodeToString(mac))
}

// verifyRequest checks r's signature under key at now, and returns its
// nonce, the signed header names and when it was signed.
func verifyRequest(r *http.Request, body []byte, key []byte, now time.Time) (nonce string, signed []string, at time.Time, err error) {
	parts := strings.Split(r.Header.Get(SignatureHeader), ",")
	if len(parts) != 5 || parts[0] != "v2" {
		return "", nil, at, errUnsigned
	}
	ts, nonce, sig := parts[1], parts[2], parts[4]
	ms, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(nonce) != 22 {
		return "", nil, at, errUnsigned
	}
	at = time.UnixMilli(ms)
	if d := now.Sub(at); d > SignatureWindow || d < -SignatureWindow {
		return "", nil, at, fmt.Errorf("%w: signed %v away from this node's clock, over %v", errUnsigned, d.Round(time.Second), SignatureWindow)
	}
	if parts[3] != "" {
		signed = strings.Split(parts[3], ";")
	}
	if !slices.IsSorted(signed) || len(slices.Compact(slices.Clone(signed))) != len(signed) {
		return "", nil, at, errUnsigned
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, peerMAC(key, ts, nonce, signed, r, body)) {
		return "", nil, at, errUnsigned
	}
	return nonce, signed, at, nil
}

// wireHeaders puts h in the form an HTTP/1.1 client writes it in.
func wireHeaders(h http.Header) {
	for name, vs := range h {
		canon := http.CanonicalHeaderKey(name)
		if canon == "Host" || canon == "Trailer" {
			delete(h, name)
			continue
		}
		var kept []string
		for _, v := range vs {
			kept = append(kept, strings.Trim(v, " \t"))
		}
		if canon == "User-Agent" && len(kept) == 1 && kept[0] == "" {
			kept = nil // Go's client sends none
		}
		if canon != name {
			delete(h, name)
			kept = append(h[canon], kept...)
		}
		if len(kept) == 0 {
			delete(h, canon)
			continue
		}
		h[canon] = kept
	}
}

// plausiblySigned says whether r's signature has the form and the time of
// one this node could take; its MAC is checked only once its body is read.
func plausiblySigned(r *http.Request, now time.Time) bool {
	parts := strings.Split(r.Header.Get(SignatureHeader), ",")
	if len(parts) != 5 || parts[0] != "v2" {
		return false
	}
	ms, err := strconv.ParseInt(parts[1], 10, 64)
	d := now.Sub(time.UnixMilli(ms))
	return err == nil && d <= SignatureWindow && d >= -SignatureWindow
}

// verifyPeer checks a peer request's signature, that it is for this node,
// and its nonce, and removes the headers it did not sign.
func (h *Handler) verifyPeer(r *http.Request, body []byte) error {
	now := time.Now()
	nonce, signed, at, err := verifyRequest(r, body, h.cfg.ClusterKey, now)
	if err != nil {
		return err
	}
	if to := r.Header.Get(ForwardedToHeader); to != string(h.cfg.Node) {
		return fmt.Errorf("%w: signed for node %q, not this node (%s)", errUnsigned, to, h.cfg.Node)
	}
	switch inst := r.Header.Get(ForwardedInstanceHeader); {
	case inst != "" && inst != string(h.cfg.Instance):
		return fmt.Errorf("%w: signed for instance %q, this one is %q", errOtherInstance, inst, h.cfg.Instance)
	case inst == "" && at.UnixMilli() < h.started.UnixMilli():
		return fmt.Errorf("%w: signed for no instance before this node started", errOtherInstance)
	}
	if !h.peers.first(nonce, now) {
		return errReplayed
	}
	for name := range r.Header {
		if !unsignedHeaders[name] {
			if _, ok := slices.BinarySearch(signed, name); !ok {
				delete(r.Header, name)
			}
		}
	}
	return nil
}

// peerMAC is the MAC of what a peer request says (see SignatureHeader).
// A header named but absent counts as empty, so a removed header fails.
func peerMAC(key []byte, ts, nonce string, names []string, r *http.Request, body []byte) []byte {
	sum := sha256.Sum256(body)
	m := hmac.New(sha256.New, key)
	for _, part := range []string{"v2", ts, nonce, r.Method, r.URL.EscapedPath(), r.URL.RawQuery} {
		m.Write([]byte(part))
		m.Write([]byte{'\n'})
	}
	for _, name := range names {
		m.Write([]byte(name))
		for _, v := range r.Header[name] {
			m.Write([]byte{0})
			m.Write([]byte(v))
		}
		m.Write([]byte{'\n'})
	}
	m.Write([]byte(hex.EncodeToString(sum[:])))
	return m.Sum(nil)
}

// nonces remembers the nonces of the peer requests taken, by the second
// of their arrival, as long as a signature made then could still be
// taken. Only requests whose MAC checked are remembered, so only a peer
// can fill it, at the rate it forwards.
type nonces struct {
	now  func() time.Time
	mu   sync.Mutex
	secs map[int64]map[string]struct{}
}

func newNonces(now func() time.Time) *nonces {
	return &nonces{now: now, secs: make(map[int64]map[string]struct{})}
}

// first records nonce, seen at now, and says whether it is new.
func (n *nonces) first(nonce string, now time.Time) bool {
	sec := now.Unix()
	// A signature taken at now was made at most a window earlier and is
	// taken at most a window later: its nonce must be remembered for two.
	oldest := sec - int64(2*SignatureWindow/time.Second) - 1
	n.mu.Lock()
	defer n.mu.Unlock()
	for s, set := range n.secs {
		if s < oldest {
			delete(n.secs, s)
			continue
		}
		if _, ok := set[nonce]; ok {
			return false
		}
	}
	set := n.secs[sec]
	if set == nil {
		set = make(map[string]struct{})
		n.secs[sec] = set
	}
	set[nonce] = struct{}{}
	return true
}
