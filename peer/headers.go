package peer

import (
	"errors"
	"net/http"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// ForwardedHeader marks a request one node forwarded to another; its value
// is the forwarding node's id.
const ForwardedHeader = "Wasmkeep-Forwarded-By"

// NotRunHeader marks a 503 for an event that did not run (the node refused
// it: its lease lapsed, it is starting, the record was contended). A node
// that forwarded the event may send it again, within the failover wait.
const NotRunHeader = "Wasmkeep-Not-Run"

// EventKeyHeader carries the key of an event a node sends to another (a
// forward's, a call's: actorhost.EventKey.String), so that the actor runs it
// at most once however often it is sent. Only a peer may send it.
const EventKeyHeader = "Wasmkeep-Event-Key"

// CallChainHeader carries the chain of a call forwarded to another node:
// the actors waiting for it, outermost first, each as its escaped class
// and name joined by "/", separated by commas.
const CallChainHeader = "Wasmkeep-Call-Chain"

// TakeHeader marks a move's take call: a peer that released an actor for
// this node asks it to take the actor (docs/PROTOCOL.md §5). It is a POST to
// the actor's path from a peer (signed with the cluster key when the nodes
// have one); the class runs no event for it.
const TakeHeader = "Wasmkeep-Take"

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

// ErrUnsigned: a request carries peer headers but no valid signature.
var ErrUnsigned = errors.New("peer request without a valid cluster signature")

// ErrReplayed: a validly signed request whose nonce was seen before.
var ErrReplayed = errors.New("peer request replayed: its nonce was seen before")

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

// Headers are the headers only a peer may send.
var Headers = []string{ForwardedHeader, ForwardedToHeader, ForwardedInstanceHeader, CallChainHeader, SignatureHeader, EventKeyHeader}

// ErrOtherInstance: a peer request signed for another start of this node.
var ErrOtherInstance = errors.New("peer request signed for another start of this node")

// setInstance names the instance a peer request is for, when known.
func setInstance(h http.Header, inst ownership.InstanceID) {
	if inst != "" {
		h.Set(ForwardedInstanceHeader, string(inst))
	}
}

// unsignedHeaders are left out of the MAC, and kept when unsigned: the
// HTTP layer sets them from the body and the connection, not the sender.
var unsignedHeaders = map[string]bool{"Content-Length": true, "Transfer-Encoding": true, SignatureHeader: true}

// IsRequest says whether r carries any header only a peer may send.
func IsRequest(r *http.Request) bool {
	for _, h := range Headers {
		if _, ok := r.Header[h]; ok {
			return true
		}
	}
	return false
}
