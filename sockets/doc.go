// Package sockets is the node's WebSocket owner.
//
// An actor accepts a WebSocket upgrade inside its HTTP request handler
// (Owner.Accept); from then on the socket belongs to the node, not to the
// actor in memory, so the actor may hibernate while its clients stay
// connected. What arrives on a socket is handed to the node's Sink (Message,
// then one terminal Close or Error), which wakes the actor; what the actor
// does with its sockets (Send, Broadcast, Close, List, attachments, an
// auto-response) goes through the Owner, keyed by the actor, so it works the
// same whether the actor was resident when the socket opened or not.
//
// # Outbound sockets
//
// An actor may also open a client WebSocket to a service (Owner.Dial,
// dial.go), through the node's egress dialer. It is a socket of the
// actor's room like an accepted one: the same Sink events, slots, pings,
// sends and closes; its ID has DialedBit set.
//
// # One socket owner per actor
//
// The Owner keeps each actor's sockets in a room of their own (rooms.go):
// its open sockets, its upgrades under way and its auto-response, from the
// first to the last, across the actor's hibernation. What acts for one
// actor (Send, Broadcast, Close, List, attachments) takes only that room's
// lock, and a message arriving on a socket reads its room's auto-response
// with no lock at all: no lock of the node is on the path of a message or
// a broadcast. The index of rooms is split over 64 read-mostly locks, taken
// to find a room, and for writing only to make or drop one. A close of every
// socket (a drain, a lapse, Shutdown) takes the one node-wide lock, for
// writing, which an accept takes for reading while it adds its socket, so
// that no accept escapes such a close; a close of one actor's sockets and
// a broadcast take its room's lock, which its accepts take too. Slots
// (MaxSockets) are counted with an atomic counter.
//
// # What the Owner keeps per socket
//
// The actor (ownership.Actor) it belongs to, up to MaxTags tags fixed at
// accept, an attachment of up to MaxAttachment bytes that outlives the
// actor's hibernation, a bounded send queue, and the time of its last
// auto-response. Nothing else is kept for an actor, except its
// auto-response pair.
//
// # Bounds on what is held
//
// Outgoing: each socket's send queue holds at most SendQueue bytes, and
// all of them together at most SendQueueTotal (default 256 MiB, less
// under a low GOMEMLIMIT): past it the sockets that hold the most are
// closed with 1013, largest first, until the total is back to seven
// eighths of it; the socket sending is closed only if it is one of them
// (queued.go). A broadcast counts once per socket that has not written it
// yet. The gauge wasmkeep_websocket_queued_bytes shows the total.
//
// Incoming: one message is at most MaxMessage bytes, fragmented or not.
// gorilla counts the payload of each frame of a message against
// SetReadLimit(MaxMessage) as the frame's header arrives, before reading
// the payload, so a message in many fragments is bounded as a whole, as
// one frame is: past it the socket is closed with 1009 (ErrMessageTooBig).
// A message being read is held in a buffer that grows to its size (up to
// about twice that while it grows); control frames are at most 125 bytes
// and handled as they come.
//
// # RFC 6455
//
// gorilla/websocket does the framing, masking, fragmentation, pings and
// the checks of frame headers (RSV bits without an extension, reserved
// opcodes, fragmented or oversized control frames, continuations without
// a start, unmasked client frames), failing the connection with 1002. It
// does not check that text is UTF-8, and checks close frames otherwise
// than the RFC, so the owner does:
//
//   - A text message that is not UTF-8 fails its socket with 1007
//     (ErrInvalidUTF8) as soon as the bytes read tell it, before the rest of
//     the message or its last fragment (utf8.go); the Sink never gets it.
//     Send and Broadcast refuse such text (ErrInvalid and ErrInvalidUTF8),
//     as do Close and SetAutoResponse, so the node never sends any.
//   - Each close frame of a client is judged before gorilla reads it
//     (closeframe.go): a payload of 1 byte, or a code no close frame may
//     carry (0-999, 1004-1006, 1015-2999, 5000 and over), fails with 1002; a
//     reason that is not UTF-8 with 1007 (gorilla: 1002); 1014 is echoed
//     (gorilla refuses it). A valid close is echoed with its code.
//   - No extension is negotiated: an offer of permessage-deflate is
//     ignored, and a frame with RSV1 fails with 1002.
//
// What remains of gorilla's way: the close frame of a fault gorilla finds
// (1002 on a header, 1009) is written with gorilla's own one-second
// deadline, not WriteTimeout, with gorilla's text as its reason; each
// ping is answered with its own pong, however fast pings come (the RFC
// lets an endpoint answer only the latest); and a close frame gorilla
// fails on its header (RSV bits, not final, over 125 bytes, unmasked) is
// not judged, since gorilla has failed the connection already. When the
// client closes, what is still queued for it is dropped and the close
// echoed at once (RFC 6455 section 5.5.1 allows either). The node sends
// each message as one frame. tests/wsconform runs the sections an
// Autobahn fuzzing client goes through; sockets/CONFORMANCE.md has its
// results.
//
// # Invariants
//
//   - Sink.Opened(a) is called once per accepted socket, before any other
//     event of that socket; Sink.Gone(a) exactly once per socket, when it
//     starts closing (either side) or its slot is freed, whichever is first.
//     They map one to one onto ownership.SocketOpened and
//     ownership.SocketGone: the ownership core's count of an actor's open
//     sockets is Opened minus Gone.
//   - Per socket, Sink events come in this order: Opened, Message...,
//     Gone, and last exactly one of Close or Error, called after the slot
//     is freed (List no longer shows it, Send fails).
//     Messages may still arrive between Gone and the terminal event (a peer
//     may keep sending until it sees our close frame).
//   - At most MaxSockets slots are held; a request past it is answered 503
//     with Retry-After before the protocol switches.
//   - An idle socket costs one goroutine (its reader). A message sent
//     while nothing is queued is written on the sender's goroutine if the
//     kernel takes it at once (direct.go); a broadcast hands its direct
//     writes to the kernel in one io_uring submission (batch.go,
//     Config.NoIOUring); a writer goroutine works for a
//     socket only while its send queue is non-empty, and writers that are
//     done wait for the next socket, at most 128 of them (internal/gopool).
//     Pings are sent by one goroutine for all sockets (a wheel of slots,
//     see ping.go); no socket has a timer of its own while idle.
//   - Frames never interleave on the wire: gorilla's writes and direct
//     ones take one lock per connection, and the tail of a frame written
//     directly in part is completed before anything else.
//   - CloseActor and CloseAll also close the sockets whose upgrade is
//     under way, as soon as they are open.
//
// # Failure
//
// The socket owner of one actor (its room) fails alone. A panic while
// acting for a room, in one of its operations (Send, Broadcast, Close,
// List, attachments, auto-responses; CloseActor and CloseAll per socket)
// or on a goroutine of one of its sockets (the reader, a writer, the
// pinger's work for it), is recovered there, logged once at error level
// with the actor, the operation and the stack, counted
// (wasmkeep_websocket_owner_failures_total{op}, and Config.Failed), and
// closes every socket of the room with 1011 (ErrInternal) the way a fault
// closes a socket: Gone for each, then its terminal Error, so the node
// sees the actor's sockets go as when its clients leave. The operation
// returns ErrInternal. Other rooms and the node carry on, and the room
// takes new sockets. See failure.go.
//
// # Memory
//
// An idle socket costs about 5 KB of RSS, against about 11.5 KB for
// gorilla/websocket with its default buffers measured the same way
// (BenchmarkIdleSocketMemory: 2,000 sockets over 127.0.0.1, the clients in
// a child process). Of it, 2.2 KB is heap, 2 KiB the reader's stack, and
// the rest runtime memory outside the heap (poll descriptors, span and GC
// metadata). What keeps it there: a 256-byte read buffer of its own (a
// large message is read past it), write buffers from a pool shared by all
// sockets (held only while a message is written), no writer goroutine
// while the queue is empty, no timer while idle, and a reader whose idle
// stack fits 2 KiB (see read). A reader whose stack grew while handling a
// message may keep 4 KiB after it (the runtime shrinks a stack only below
// a quarter used): about 7 KB of RSS then. An idle outbound socket costs
// about 0.4 to 1.6 KB more (BenchmarkIdleDialedMemory: 4.2 to 5.4 KB),
// of which about 0.4 KB heap (its URL, gorilla's client state).
//
// # Goroutines
//
// Every method of Owner is safe for concurrent use. Sink methods are called
// from socket goroutines and from callers of Owner methods (Close,
// CloseActor, CloseAll, Send and Broadcast call Gone on the caller's
// goroutine, Send and Broadcast for the socket sent to or, past
// SendQueueTotal, the sockets they close for it; Send and Broadcast may
// write to the kernel there, never waiting), never with a lock of this
// package held, so a Sink may call back into the Owner.
// Opened and Gone must not block; Message may block, which holds back only
// that socket's reading (TCP then pushes back on the client), and may fail
// (its message was not handed to the actor here), which closes that socket
// with 1012 and UndeliveredReason.
package sockets
