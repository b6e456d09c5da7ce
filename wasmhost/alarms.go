package wasmhost

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/wasmhost/internal/wire"
)

// The host side of an actor's alarms (ABI.md, minor version 1): the
// alarm_* functions set, read, delete and list the event's actor's
// alarms through package actors, and an alarm event calls
// wasmkeep_on_alarm, the alarm read with alarm_event_len and
// alarm_event_read.

// alarm_set's and alarm_delete's answers besides 0.
const (
	alarmBad   = -1 // the name is empty, too long, "." or "..", or holds control characters
	alarmLimit = -2 // the actor has actors.MaxAlarms alarms, or its storage is full
)

func alarmFunctions(fn hostFunc) {
	// alarm_set(name, name_len i32, at_ms i64) -> i32
	fn("alarm_set", func(ctx context.Context, mod api.Module, stack []uint64) {
		name := string(read(mod, api.DecodeU32(stack[0]), api.DecodeU32(stack[1])))
		at := time.UnixMilli(int64(stack[2]))
		stack[0] = api.EncodeI32(alarmCode(actors.SetAlarm(ctx, name, at)))
	}, []api.ValueType{i32, i32, api.ValueTypeI64}, []api.ValueType{i32})
	// alarm_get(name, name_len i32) -> i64: when it is due, in Unix ms, or
	// -1 when it is not set (or the name is not an alarm's).
	fn("alarm_get", func(ctx context.Context, mod api.Module, stack []uint64) {
		name := string(read(mod, api.DecodeU32(stack[0]), api.DecodeU32(stack[1])))
		at, ok, err := actors.GetAlarm(ctx, name)
		if err != nil || !ok {
			if err != nil && !errors.Is(err, actors.ErrBadAlarm) {
				panic(err) // a storage read failed: the event fails
			}
			stack[0] = api.EncodeI64(-1)
			return
		}
		stack[0] = api.EncodeI64(at.UnixMilli())
	}, []api.ValueType{i32, i32}, []api.ValueType{api.ValueTypeI64})
	// alarm_delete(name, name_len i32) -> i32
	fn("alarm_delete", func(ctx context.Context, mod api.Module, stack []uint64) {
		name := string(read(mod, api.DecodeU32(stack[0]), api.DecodeU32(stack[1])))
		stack[0] = api.EncodeI32(alarmCode(actors.DeleteAlarm(ctx, name)))
	}, []api.ValueType{i32, i32}, []api.ValueType{i32})
	// alarm_list_len() -> i32: the size of the encoded list of the actor's
	// alarms, kept for alarm_list_read.
	fn("alarm_list_len", func(ctx context.Context, _ api.Module, stack []uint64) {
		ev := eventOf(ctx)
		list, err := actors.ListAlarms(ctx)
		if err != nil {
			panic(err) // a storage read failed: the event fails
		}
		b := wire.AppendU32(nil, uint32(len(list)))
		for _, a := range list {
			b = appendAlarm(b, a)
		}
		ev.alarms = b
		stack[0] = api.EncodeU32(uint32(min(len(b), math.MaxInt32)))
	}, nil, []api.ValueType{i32})
	// alarm_list_read(ptr, len) -> i32
	fn("alarm_list_read", readKept(func(ev *event) *[]byte { return &ev.alarms }), []api.ValueType{i32, i32}, []api.ValueType{i32})
	// alarm_event_len() -> i32: the size of the encoded alarm of an alarm
	// event; 0 in any other event.
	fn("alarm_event_len", func(ctx context.Context, _ api.Module, stack []uint64) {
		stack[0] = api.EncodeU32(uint32(len(eventOf(ctx).alarm)))
	}, nil, []api.ValueType{i32})
	// alarm_event_read(ptr, len) -> i32
	fn("alarm_event_read", func(ctx context.Context, mod api.Module, stack []uint64) {
		stack[0] = api.EncodeU32(write(mod, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), eventOf(ctx).alarm))
	}, []api.ValueType{i32, i32}, []api.ValueType{i32})
}

// alarmCode is alarm_set's or alarm_delete's answer for err.
func alarmCode(err error) int32 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, actors.ErrBadAlarm):
		return alarmBad
	case errors.Is(err, actors.ErrLimit):
		return alarmLimit
	}
	panic(err) // a storage read failed: the event fails
}

// appendAlarm lays an alarm out as ABI.md's alarm encoding.
func appendAlarm(b []byte, a actors.Alarm) []byte {
	b = wire.AppendString(b, a.Name)
	b = wire.AppendU64(b, uint64(a.At.UnixMilli()))
	return wire.AppendU32(b, uint32(a.Retry))
}

func encodeAlarm(a actors.Alarm) []byte { return appendAlarm(nil, a) }
