// Package wsconform holds the node's WebSocket conformance suite: the
// sections of RFC 6455 an Autobahn TestSuite fuzzing client goes through
// (framing, pings and pongs, reserved bits, opcodes, fragmentation, UTF-8,
// close handling, limited performance, compression), as cases of our own,
// driven by a raw TCP client (it writes frames whole or a few bytes at a
// time, as a case needs) against a sockets.Owner whose actor echoes every
// message it gets. It is a test package only; its run writes the table of
// sockets/CONFORMANCE.md:
//
//	WSCONFORM_REPORT=$PWD/sockets/CONFORMANCE.md go test -race -run Conformance ./tests/wsconform/
package wsconform
