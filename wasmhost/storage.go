package wasmhost

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"math"

	"github.com/tetratelabs/wazero/api"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/wasmhost/internal/wire"
)

// The storage part of the guest ABI (ABI.md): the actor's key-value
// storage, through the event's actors.Storage, so that reads see the
// event's writes and the writes commit with the event or not at all.

func storageFunctions(fn hostFunc) {
	// storage_get_len(key, key_len) -> i32: the value's size, or -1 if
	// missing. The value waits for storage_get_read.
	fn("storage_get_len", func(ctx context.Context, mod api.Module, stack []uint64) {
		ev := eventOf(ctx)
		key := read(mod, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
		v, ok := ev.st.Get(string(key))
		if !ok {
			ev.value = nil
			stack[0] = api.EncodeI32(-1)
			return
		}
		ev.value = v
		stack[0] = api.EncodeU32(uint32(len(v)))
	}, []api.ValueType{i32, i32}, []api.ValueType{i32})
	// storage_get_read(ptr, len) -> i32: copies the value of the last
	// storage_get_len into the buffer.
	fn("storage_get_read", func(ctx context.Context, mod api.Module, stack []uint64) {
		ev := eventOf(ctx)
		n := write(mod, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), ev.value)
		ev.value = nil
		stack[0] = api.EncodeU32(n)
	}, []api.ValueType{i32, i32}, []api.ValueType{i32})
	// storage_put(key, key_len, val, val_len) -> i32: 0, or 1 if refused
	// by a storage limit.
	fn("storage_put", func(ctx context.Context, mod api.Module, stack []uint64) {
		ev := eventOf(ctx)
		key := read(mod, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
		val := read(mod, api.DecodeU32(stack[2]), api.DecodeU32(stack[3]))
		if err := ev.st.Put(string(key), val); err != nil {
			ev.logger().Debug("guest storage put refused", slog.Any("err", err))
			stack[0] = 1
			return
		}
		stack[0] = 0
	}, []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32})
	// storage_list_len(opts, opts_len) -> i32: the size of the encoded
	// result, or -1 for invalid options. The result waits for
	// storage_list_read.
	fn("storage_list_len", func(ctx context.Context, mod api.Module, stack []uint64) {
		ev := eventOf(ctx)
		ev.list = nil
		opt, ok := decodeListOptions(read(mod, api.DecodeU32(stack[0]), api.DecodeU32(stack[1])))
		if !ok {
			ev.logger().Debug("guest storage list refused: options malformed")
			stack[0] = api.EncodeI32(-1)
			return
		}
		entries, err := ev.st.List(opt)
		if err != nil {
			ev.logger().Debug("guest storage list refused", slog.Any("err", err))
			stack[0] = api.EncodeI32(-1)
			return
		}
		ev.list = encodeEntries(entries)
		if len(ev.list) > math.MaxInt32 { // an i32 cannot size it
			ev.list = nil
			ev.logger().Debug("guest storage list refused: result over 2 GiB")
			stack[0] = api.EncodeI32(-1)
			return
		}
		stack[0] = api.EncodeU32(uint32(len(ev.list)))
	}, []api.ValueType{i32, i32}, []api.ValueType{i32})
	// storage_list_read(ptr, len) -> i32: copies the result of the last
	// storage_list_len into the buffer.
	fn("storage_list_read", func(ctx context.Context, mod api.Module, stack []uint64) {
		ev := eventOf(ctx)
		n := write(mod, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), ev.list)
		ev.list = nil
		stack[0] = api.EncodeU32(n)
	}, []api.ValueType{i32, i32}, []api.ValueType{i32})
	// storage_batch(ptr, len) -> i32: 0, or 1 if refused by a storage
	// limit (nothing applied). A malformed encoding is an ABI violation.
	fn("storage_batch", func(ctx context.Context, mod api.Module, stack []uint64) {
		ev := eventOf(ctx)
		ops, n, ok := decodeBatch(read(mod, api.DecodeU32(stack[0]), api.DecodeU32(stack[1])))
		if !ok {
			panic(errBadBatch)
		}
		if n > actors.MaxBatchOps {
			ev.logger().Debug("guest storage batch refused", slog.Int("ops", n), slog.Int("max", actors.MaxBatchOps))
			stack[0] = 1
			return
		}
		if err := ev.st.Batch(ops...); err != nil {
			ev.logger().Debug("guest storage batch refused", slog.Any("err", err))
			stack[0] = 1
			return
		}
		stack[0] = 0
	}, []api.ValueType{i32, i32}, []api.ValueType{i32})
	// storage_delete(key, key_len)
	fn("storage_delete", func(ctx context.Context, mod api.Module, stack []uint64) {
		ev := eventOf(ctx)
		ev.st.Delete(string(read(mod, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))))
	}, []api.ValueType{i32, i32}, nil)
	// storage_delete_all() -> i32: 0, or 1 if the storage could not be
	// listed (nothing deleted).
	fn("storage_delete_all", func(ctx context.Context, _ api.Module, stack []uint64) {
		ev := eventOf(ctx)
		if err := actors.DeleteAll(ev.st); err != nil {
			ev.logger().Debug("guest storage delete all refused", slog.Any("err", err))
			stack[0] = 1
			return
		}
		stack[0] = 0
	}, nil, []api.ValueType{i32})
	// storage_get_many_len(keys, keys_len) -> i32: the size of the
	// encoded values, or -1 for over maxGetKeys keys. The values wait for
	// storage_get_many_read. A malformed encoding is an ABI violation.
	fn("storage_get_many_len", func(ctx context.Context, mod api.Module, stack []uint64) {
		ev := eventOf(ctx)
		ev.many = nil
		keys, n, ok := decodeKeys(read(mod, api.DecodeU32(stack[0]), api.DecodeU32(stack[1])))
		if !ok {
			panic(errBadKeys)
		}
		if n > maxGetKeys {
			ev.logger().Debug("guest storage get many refused", slog.Int("keys", n), slog.Int("max", maxGetKeys))
			stack[0] = api.EncodeI32(-1)
			return
		}
		ev.many = encodeValues(ev.st, keys)
		stack[0] = api.EncodeU32(uint32(len(ev.many)))
	}, []api.ValueType{i32, i32}, []api.ValueType{i32})
	// storage_get_many_read(ptr, len) -> i32: copies the values of the
	// last storage_get_many_len into the buffer.
	fn("storage_get_many_read", func(ctx context.Context, mod api.Module, stack []uint64) {
		ev := eventOf(ctx)
		n := write(mod, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), ev.many)
		ev.many = nil
		stack[0] = api.EncodeU32(n)
	}, []api.ValueType{i32, i32}, []api.ValueType{i32})
}

// maxGetKeys bounds the keys of one storage_get_many_len (ABI.md), so
// that the values it holds for the guest are at most maxGetKeys ×
// actors.MaxValueLen bytes (16 MiB), however often a key is asked.
const maxGetKeys = 128

// Invariant: the encoded values of maxGetKeys keys fit an i32 (the
// constant does not compile if negative).
const _ uint32 = math.MaxInt32 - maxGetKeys*(5+actors.MaxValueLen) - 4

// errBadKeys fails a storage_get_many_len call whose encoding is
// malformed.
var errBadKeys = errors.New("wasmkeep storage_get_many_len given a malformed encoding")

// decodeKeys decodes the keys of storage_get_many_len: a count, then each
// key. It checks the whole encoding but keeps at most maxGetKeys keys, so
// that a guest cannot make the host allocate for more; n is the count of
// keys encoded.
func decodeKeys(b []byte) (keys []string, n int, ok bool) {
	r := wire.NewReader(b)
	n = r.Count(4)
	keys = make([]string, 0, min(n, maxGetKeys))
	for i := range n {
		if i < maxGetKeys {
			keys = append(keys, r.String())
		} else {
			r.Skip()
		}
	}
	if r.Err() {
		return nil, 0, false
	}
	return keys, n, true
}

// encodeValues looks up keys in st and lays out the result of
// storage_get_many_len: a count, then for each key in order whether it has
// a value (a byte, 1 or 0) and, if so, the value.
func encodeValues(st actors.Storage, keys []string) []byte {
	vals := actors.GetMany(st, keys...)
	size := 4
	for _, k := range keys {
		size++
		if v, ok := vals[k]; ok {
			size += 4 + len(v)
		}
	}
	b := make([]byte, 0, size)
	b = wire.AppendU32(b, uint32(len(keys)))
	for _, k := range keys {
		v, ok := vals[k]
		if !ok {
			b = append(b, 0)
			continue
		}
		b = append(b, 1)
		b = wire.AppendBytes(b, v)
	}
	return b
}

// List flags (ABI.md).
const listReverse = 1 << 0

// decodeListOptions decodes the options of storage_list_len: prefix,
// start and end strings, limit and flags. Unknown flags make them
// invalid.
func decodeListOptions(b []byte) (actors.ListOptions, bool) {
	r := wire.NewReader(b)
	opt := actors.ListOptions{Prefix: r.String(), Start: r.String(), End: r.String(), Limit: int(r.U32())}
	flags := r.U32()
	if r.Err() || flags&^listReverse != 0 {
		return actors.ListOptions{}, false
	}
	opt.Reverse = flags&listReverse != 0
	return opt, true
}

// encodeEntries lays out the result of storage_list_len: a count, then
// each key and value.
func encodeEntries(entries []actors.Entry) []byte {
	n := 4
	for _, e := range entries {
		n += 8 + len(e.Key) + len(e.Value)
	}
	b := make([]byte, 0, n)
	b = wire.AppendU32(b, uint32(len(entries)))
	for _, e := range entries {
		b = wire.AppendString(b, e.Key)
		b = wire.AppendBytes(b, e.Value)
	}
	return b
}

// Op kinds of storage_batch (ABI.md).
const (
	batchPut    = 1
	batchDelete = 2
)

// errBadBatch fails a storage_batch call whose encoding is malformed.
var errBadBatch = errors.New("wasmkeep storage_batch given a malformed encoding")

// decodeBatch decodes the encoding of storage_batch: a count, then each
// op's kind, key and, for a put, value. It checks the whole encoding but
// keeps at most actors.MaxBatchOps ops, so that a guest cannot make the
// host allocate for more; n is the count of ops encoded. The values alias
// b.
func decodeBatch(b []byte) (ops []actors.Op, n int, ok bool) {
	u32 := func() (uint32, bool) {
		if len(b) < 4 {
			return 0, false
		}
		v := binary.LittleEndian.Uint32(b)
		b = b[4:]
		return v, true
	}
	str := func() ([]byte, bool) {
		l, ok := u32()
		if !ok || uint64(l) > uint64(len(b)) {
			return nil, false
		}
		s := b[:l:l]
		b = b[l:]
		return s, true
	}
	count, ok := u32()
	if !ok || uint64(count)*5 > uint64(len(b)) { // an op takes at least 5 bytes
		return nil, 0, false
	}
	ops = make([]actors.Op, 0, min(count, actors.MaxBatchOps))
	for i := range int(count) {
		if len(b) == 0 {
			return nil, 0, false
		}
		kind := b[0]
		b = b[1:]
		key, ok := str()
		if !ok {
			return nil, 0, false
		}
		op := actors.Op{Delete: kind == batchDelete}
		switch kind {
		case batchPut:
			if op.Value, ok = str(); !ok {
				return nil, 0, false
			}
		case batchDelete:
		default:
			return nil, 0, false
		}
		if i < actors.MaxBatchOps {
			op.Key = string(key)
			ops = append(ops, op)
		}
	}
	if len(b) != 0 {
		return nil, 0, false
	}
	return ops, int(count), true
}
