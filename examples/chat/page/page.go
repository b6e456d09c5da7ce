// Package page holds what the Go-native chat class and the wasm room example
// share: the web page, the protocol's limits and its input cleaning (the
// wasm room cannot import package chat: a guest imports only what compiles
// for wasip1).
package page

import _ "embed"

// HTML is the page: pick a name, chat, see who is here. It talks the chat
// protocol of package chat over a WebSocket to its own address, and keeps
// what it shows in window.chat for tests.
//
//go:embed page.html
var HTML []byte
