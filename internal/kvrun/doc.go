// Package kvrun encodes, reads, iterates and merges runs: immutable
// objects of key-value entries sorted by key, written once and then read a
// block at a time with ranged reads.
//
// An actor's durable storage is a small head object listing its runs,
// newest first, each with its Meta; an entry of a newer run (a tombstone
// too) hides the same key in older ones. The head, the bucket and the
// choice of what to merge when belong to the caller. This package does no
// I/O: a Writer hands out a run's bytes, and a Reader reads through the
// Fetch it is given.
//
// # API
//
// A Writer takes entries in strictly ascending key order and Finish
// returns the run and its Meta, which the head stores (Meta.AppendBinary,
// UnmarshalBinary). Open gives a Reader of one run from its Meta: Get
// looks one key up, Iter walks a window of keys (a prefix, a start, an
// end, ascending or descending), tombstones included. IterSlice walks a
// sorted slice in memory the same way, and Merge combines iterators newest
// first, so that a head's table in memory, an event's writes and the runs
// read as one. ReadMeta rebuilds a Meta from a run alone, from its footer.
//
// # Format
//
// A run is, in this order:
//
//	data block 0 | data block 1 | … | data block n-1 | index | filter | footer
//
// uvarint is an unsigned varint as in encoding/binary (at most 10 bytes);
// u8, u32 and u64 are little-endian unsigned integers; crc is the CRC-32C
// (Castagnoli) of the bytes it names, as a u32.
//
// A data block is its entries one after another, at least one, nothing
// else (its checksum is in the index). An entry is:
//
//	uvarint shared        bytes of the key shared with the block's previous key (0 for the first)
//	uvarint unshared      bytes of the key that follow (at least 1)
//	uvarint vlen<<1 | t   the value's length; t = 1 for a tombstone, whose vlen is 0
//	unshared bytes        the rest of the key
//	vlen bytes            the value
//
// The Writer closes a block before the entry that would take it past
// Options.BlockSize (16 KiB by default), so an entry larger than a block
// has a block of its own. Blocks are contiguous from offset 0: block i
// starts where block i-1 ends, and the last ends at the index.
//
// The index, at Meta.IndexOff, Meta.IndexLen bytes long:
//
//	uvarint n             the number of data blocks (0 for an empty run)
//	uvarint len, bytes    the run's first key, MinKey ("" for an empty run)
//	n times, for block i:
//	  uvarint shared      bytes shared with the previous index key (for block 0, with MinKey)
//	  uvarint unshared    bytes that follow
//	  unshared bytes      the rest of block i's last key
//	  uvarint length      block i's length in bytes
//	  u32 crc             of block i
//	u32 crc               of the index before it
//
// The filter, at Meta.FilterOff = IndexOff+IndexLen, Meta.FilterLen
// bytes long, is a bloom filter over every key, tombstones included, in
// lines of 64 bytes:
//
//	m bytes               the bits: m/64 lines of 512 bits (m = 0 for an empty run); bit b of a
//	                      line is bit b%8 (least significant first) of its byte b/8
//	u8 k                  probes a key, 1 to 30 (bits a key · ln 2, by default 10 bits and 6 probes)
//	u32 crc               of the bits and k
//
// A key's hash h is MurmurHash64A of its bytes with seed 0x6b7672756e.
// Its line is (h>>32) · (m/64) >> 32; with p = the low 32 bits of h, its
// k bits are p>>23 of that line, then p is multiplied by 0x9e3779b9
// (modulo 2^32), k times. A key none of whose bits is clear may be in the
// run; any other is not.
//
// The footer, the run's last 64 bytes:
//
//	 0  u64 IndexOff
//	 8  u64 IndexLen
//	16  u64 FilterLen
//	24  u64 Entries
//	32  u64 Tombstones
//	40  u64 LiveBytes
//	48  u32 format version, 1
//	52  u32 crc of bytes 0 to 51
//	56  8 bytes "wkrun\x00\x00\x01"
//
// A Meta encodes (Meta.AppendBinary) as a version byte (1), the uvarints
// Size, Entries, Tombstones, LiveBytes, IndexOff, IndexLen and FilterLen,
// MinKey as a uvarint length and its bytes, and MaxKey as the uvarint
// length of its prefix shared with MinKey, the uvarint length of the rest
// and the rest: for a run of 8 MiB, 25 bytes besides those of the keys.
//
// # Invariants
//
//   - Keys are not empty, at most MaxKeyLen bytes, and strictly ascending
//     over the whole run; values are at most MaxValueLen bytes; a
//     tombstone has no value. (The limits are those of actors.Storage.)
//   - Index key i is block i's last key; block i's first key comes after
//     index key i-1; block 0's first key is MinKey and the last index key
//     is MaxKey.
//   - Size = FilterOff + FilterLen + 64, and the blocks tile [0, IndexOff)
//     exactly. An entry takes at least 4 bytes, so Entries ≤ IndexOff/4.
//   - Nothing fetched is used before it is checked: its CRC, then its
//     structure (lengths within what is left, keys in order and within the
//     bounds the index gives the block, the index agreeing with the Meta).
//     Whatever fails is an error wrapping ownership.ErrDamaged, never a
//     panic and never an answer from bytes that did not pass. A Fetch
//     that returns fewer bytes than asked (the object is cut short) is
//     damage too; a Fetch's own error is passed on, wrapped, as it is.
//   - A run is never rewritten, so the run's id and an offset name the
//     same bytes forever, and what the Cache keeps never goes stale.
//
// # Reading
//
// The head's Meta lets a Reader skip the footer: Iter's first Next
// fetches the index, Get's first call the index and the filter together
// (one ranged read), and each then one block at a time. A cold Get costs
// at most two fetches (none for a key outside [MinKey, MaxKey], one when
// the filter rules the key out), a warm one none; an iteration costs the
// index and the blocks it reaches, so reading ten keys of a 1 GiB run
// reads one or two blocks. Only ReadMeta reads the footer.
//
// What a Reader decodes (blocks, indexes, filters) lives in a Cache shared
// by the whole node, bounded in bytes and charged what each item keeps,
// so that it bounds the memory of every run read. An Entry a Reader
// returns shares its bytes with the Cache: its Value must not be modified.
// An Iterator keeps the block it is in, cached or not.
//
// # Concurrency
//
// A Reader and a Cache may be used from any number of goroutines at once;
// a Writer and an Iterator by one at a time. A Fetch may be called from
// several goroutines at once.
//
// # Why this layout
//
//   - Blocks are decoded whole, once, into the Cache, so they need no
//     restart points for binary search: keys share prefixes with the key
//     before them throughout, and a block is searched decoded.
//   - The index holds each block's last key, so the block that may hold a
//     key is the first whose last key is not below it, and a key past the
//     last block's is known absent without a block.
//   - The index and the filter are adjacent, so a cold Get fetches both
//     with one ranged read; they are cached apart, so that an iteration
//     never fetches nor keeps the filter, which is most of their bytes.
//   - The filter is blocked, its probes of a key in one 64-byte line, so
//     that a warm Get touches one line of it however large the run.
//   - Each block, the index, the filter and the footer carry their own
//     CRC: a reader checks exactly what it fetched, nothing more.
package kvrun
