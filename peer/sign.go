package peer

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Sign signs r, whose body is body, with key at now: every header
// r has now is signed, so it is called once r's headers are final. The
// headers are first put in the form the wire gives them (canonical
// names, values trimmed; Host, Trailer and an empty User-Agent are not
// sent as headers), so what the receiver reads is what was signed.
func Sign(r *http.Request, body []byte, key []byte, now time.Time) {
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
	mac := signatureMAC(key, ts, n, names, r, body)
	r.Header.Set(SignatureHeader, "v2,"+ts+","+n+","+strings.Join(names, ";")+","+base64.RawURLEncoding.EncodeToString(mac))
}

// verify checks r's signature under key at now, and returns its
// nonce, the signed header names and when it was signed.
func verify(r *http.Request, body []byte, key []byte, now time.Time) (nonce string, signed []string, at time.Time, err error) {
	parts := strings.Split(r.Header.Get(SignatureHeader), ",")
	if len(parts) != 5 || parts[0] != "v2" {
		return "", nil, at, ErrUnsigned
	}
	ts, nonce, sig := parts[1], parts[2], parts[4]
	ms, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(nonce) != 22 {
		return "", nil, at, ErrUnsigned
	}
	at = time.UnixMilli(ms)
	if d := now.Sub(at); d > SignatureWindow || d < -SignatureWindow {
		return "", nil, at, fmt.Errorf("%w: signed %v away from this node's clock, over %v", ErrUnsigned, d.Round(time.Second), SignatureWindow)
	}
	if parts[3] != "" {
		signed = strings.Split(parts[3], ";")
	}
	if !slices.IsSorted(signed) || len(slices.Compact(slices.Clone(signed))) != len(signed) {
		return "", nil, at, ErrUnsigned
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, signatureMAC(key, ts, nonce, signed, r, body)) {
		return "", nil, at, ErrUnsigned
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

// PlausiblySigned says whether r's signature has the form and the time of
// one this node could take; its MAC is checked only once its body is read.
func PlausiblySigned(r *http.Request, now time.Time) bool {
	parts := strings.Split(r.Header.Get(SignatureHeader), ",")
	if len(parts) != 5 || parts[0] != "v2" {
		return false
	}
	ms, err := strconv.ParseInt(parts[1], 10, 64)
	d := now.Sub(time.UnixMilli(ms))
	return err == nil && d <= SignatureWindow && d >= -SignatureWindow
}

// Verifier checks the peer requests one start of a node takes: signed
// with the cluster key, recently, for this node and this start, and never
// before (it remembers their nonces). Safe for concurrent use.
type Verifier struct {
	key      []byte
	node     ownership.NodeID
	instance ownership.InstanceID
	started  time.Time
	nonces   *nonces
}

// NewVerifier is the Verifier of node's start instance, which begins now,
// under key.
func NewVerifier(key []byte, node ownership.NodeID, instance ownership.InstanceID) *Verifier {
	return &Verifier{key: key, node: node, instance: instance, started: time.Now(), nonces: newNonces(time.Now)}
}

// Check checks a peer request's signature, that it is for this node and
// this start (ErrOtherInstance otherwise: its sender sends it again once
// it has read the new lease), and its nonce, and removes the headers it
// did not sign.
func (v *Verifier) Check(r *http.Request, body []byte) error {
	now := time.Now()
	nonce, signed, at, err := verify(r, body, v.key, now)
	if err != nil {
		return err
	}
	if to := r.Header.Get(ForwardedToHeader); to != string(v.node) {
		return fmt.Errorf("%w: signed for node %q, not this node (%s)", ErrUnsigned, to, v.node)
	}
	switch inst := r.Header.Get(ForwardedInstanceHeader); {
	case inst != "" && inst != string(v.instance):
		return fmt.Errorf("%w: signed for instance %q, this one is %q", ErrOtherInstance, inst, v.instance)
	case inst == "" && at.UnixMilli() < v.started.UnixMilli():
		return fmt.Errorf("%w: signed for no instance before this node started", ErrOtherInstance)
	}
	if !v.nonces.first(nonce, now) {
		return ErrReplayed
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

// signatureMAC is the MAC of what a peer request says (see SignatureHeader).
// A header named but absent counts as empty, so a removed header fails.
func signatureMAC(key []byte, ts, nonce string, names []string, r *http.Request, body []byte) []byte {
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

// SignStatusRequest makes r, a GET of a node's /status, one that node
// serves on its public listener: signed with key, for node.
func SignStatusRequest(r *http.Request, node ownership.NodeID, key []byte) {
	r.Header.Set(ForwardedToHeader, string(node))
	Sign(r, nil, key, time.Now())
}
