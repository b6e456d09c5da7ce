// Package peer is how a node speaks to its peers: the requests it sends
// them and the checks of the requests it takes from them.
//
// A Client sends an event to the node that holds its actor: a client's
// request (Forward, which relays the holder's answer), a WebSocket upgrade
// (Relay, which then relays the socket frame by frame until either side
// ends it or the node stops: CloseRelays), an actor's call (Call), and a
// move's take call (Take). Each says what became of what it sent (Sent):
// answered, not sent, refused without running, or unknown; the loop that
// sends an event again within the failover wait, with its key, is the
// ingress's (ingress/way.go). While it waits for a holder's answer, the
// Client watches the holder's lease through the keeper, and ends the wait
// once the holder is taken for dead.
//
// Requests between nodes carry headers a client must not be able to set
// (who forwarded it, for which node and start, the call chain, the event
// key: Headers). With a cluster key, the sender signs every request (Sign)
// and the receiver takes those headers only from a request whose
// signature checks, for itself, once (Verifier).
//
// Client and Verifier are safe for concurrent use.
package peer
