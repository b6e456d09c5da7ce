// Package eventctx holds the key under which the node's runtime puts what
// an event's context carries (its actor, its sockets, its calls, its SQL
// database), for the class authors' package actors, and the wasm host, to
// read. Only the runtime sets it; the value's methods are what package
// actors asks of it.
package eventctx

// Key is the context key of an event's values.
type Key struct{}
