package sockets

import (
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// actorSockets is the socket owner of one actor (its room): its open sockets, its upgrades
// under way, and its auto-response. It lives from the first of them to the
// last, across the actor's hibernation. What acts for one actor (a send, a
// broadcast, a close, a list) takes only its room's lock, so actors never
// wait on each other's sockets; the node's index of rooms (roomIndex) is
// touched only to find a room, to make one and to drop an empty one.
type actorSockets struct {
	actor ownership.Actor
	mu    sync.Mutex
	// dead: dropped from the index; whoever holds it looks it up again.
	dead    bool
	sockets map[ID]*socket
	// pending holds the upgrades under way: a socket's handshake answer
	// reaches its client before the socket is in sockets, so what the
	// actor broadcasts meanwhile is kept for it (Broadcast) and queued
	// first once it is (Accept), and a CloseActor or CloseAll meanwhile
	// closes it once it is (Invariant: no socket escapes a close of its
	// actor's or the node's sockets).
	pending []*pendingAccept
	// auto is read by every message a socket of the room receives,
	// without the lock.
	auto atomic.Pointer[AutoResponse]
	// failing: a failure of the room is being handled (failure.go); a
	// panic meanwhile is part of it.
	failing atomic.Bool
}

// emptyLocked says the room holds nothing that needs it.
func (r *actorSockets) emptyLocked() bool {
	return len(r.sockets) == 0 && len(r.pending) == 0 && r.auto.Load() == nil
}

// roomShards spreads the index over locks, so that finding a room is a
// read lock few others share.
const roomShards = 64

// roomIndex maps actors to their rooms.
type roomIndex struct {
	seed   maphash.Seed
	shards [roomShards]roomShard
}

type roomShard struct {
	mu    sync.RWMutex
	rooms map[ownership.Actor]*actorSockets
	_     [32]byte // keeps neighbouring shards' locks off one cache line
}

func newRoomIndex() *roomIndex {
	ix := &roomIndex{seed: maphash.MakeSeed()}
	for i := range ix.shards {
		ix.shards[i].rooms = map[ownership.Actor]*actorSockets{}
	}
	return ix
}

func (ix *roomIndex) shard(a ownership.Actor) *roomShard {
	var h maphash.Hash
	h.SetSeed(ix.seed)
	h.WriteString(a.Class)
	h.WriteByte(0)
	h.WriteString(a.Name)
	return &ix.shards[h.Sum64()%roomShards]
}

// find returns a's room, or nil.
func (ix *roomIndex) find(a ownership.Actor) *actorSockets {
	sh := ix.shard(a)
	sh.mu.RLock()
	r := sh.rooms[a]
	sh.mu.RUnlock()
	return r
}

// lock returns a's room locked, making it if there is none. The caller
// adds to it and unlocks it.
func (ix *roomIndex) lock(a ownership.Actor) *actorSockets {
	for {
		r := ix.find(a)
		if r == nil {
			sh := ix.shard(a)
			sh.mu.Lock()
			if r = sh.rooms[a]; r == nil {
				r = &actorSockets{actor: a, sockets: map[ID]*socket{}}
				sh.rooms[a] = r
			}
			sh.mu.Unlock()
		}
		r.mu.Lock()
		if !r.dead {
			return r
		}
		r.mu.Unlock() // dropped meanwhile: a new one is made
	}
}

// dropIfEmpty takes r out of the index if it holds nothing. Lock order:
// the shard, then the room.
func (ix *roomIndex) dropIfEmpty(r *actorSockets) {
	sh := ix.shard(r.actor)
	sh.mu.Lock()
	r.mu.Lock()
	if !r.dead && r.emptyLocked() && sh.rooms[r.actor] == r {
		delete(sh.rooms, r.actor)
		r.dead = true
	}
	r.mu.Unlock()
	sh.mu.Unlock()
}

// each calls f with every room, locked; f must not take another room's
// lock.
func (ix *roomIndex) each(f func(*actorSockets)) {
	for i := range ix.shards {
		sh := &ix.shards[i]
		sh.mu.RLock()
		rooms := make([]*actorSockets, 0, len(sh.rooms))
		for _, r := range sh.rooms {
			rooms = append(rooms, r)
		}
		sh.mu.RUnlock()
		for _, r := range rooms {
			r.mu.Lock()
			if !r.dead {
				f(r)
			}
			r.mu.Unlock()
		}
	}
}
