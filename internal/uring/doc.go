// Package uring sends one buffer to many sockets with a single system
// call, through a Linux io_uring.
//
// A WebSocket broadcast writes the same frame to every socket of a room.
// One write(2) per socket costs a kernel entry and exit each, which on a
// virtual machine is most of the node's CPU in a broadcast beside the
// TCP work itself. A Ring queues one send per socket and submits them all
// with one io_uring_enter(2).
//
// Every send is made with MSG_DONTWAIT: it takes what the socket's send
// buffer has room for at once, or fails with EAGAIN, and never waits.
// That makes a batch complete within the submitting call, so that on
// return the kernel holds no reference to the buffer or the sockets; New
// checks that the kernel behaves so (it refuses a ring whose sends would
// wait), and SendEach returns only once every send has completed.
//
// The package knows nothing of WebSockets: the caller keeps each socket
// open for the duration of a call and handles what a socket did not take.
// Where io_uring is missing or refused (another system, an old kernel, a
// seccomp filter, kernel.io_uring_disabled), New fails with an error that
// says why and matches errors.ErrUnsupported, and the caller writes each
// socket in turn instead; its other errors (descriptors or memory short)
// may pass.
package uring
