package guest

import (
	"errors"
	"time"

	"github.com/wasmkeep/wasmkeep/wasmhost/internal/wire"
)

// Alarms (wasmhost/ABI.md, minor version 1). An actor keeps named alarms;
// when one is due, the node runs the alarm handler (HandleAlarm) as an
// event of the actor, waking it if it sleeps. Setting, re-setting and
// deleting an alarm are writes of the event, committed with its storage
// writes. The alarm ends with its event unless the event sets it again; a
// handler that returns an error fails the event (its writes are
// discarded) and the alarm is delivered again later, Alarm.Retry
// counting, up to six times.

// Alarm is one named alarm of the actor.
type Alarm struct {
	Name  string
	At    time.Time // when it is due, to the millisecond
	Retry int       // in an alarm event: the deliveries that failed before
}

// Errors of SetAlarm and DeleteAlarm.
var (
	// ErrBadAlarm: the name is empty, over 256 bytes, "." or "..", or
	// holds control characters.
	ErrBadAlarm = errors.New("guest: bad alarm name")
	// ErrAlarmLimit: the actor has 1,000 alarms already, or its storage
	// is full.
	ErrAlarmLimit = errors.New("guest: too many alarms")
)

func alarmErr(code int32) error {
	switch code {
	case 0:
		return nil
	case -1:
		return ErrBadAlarm
	}
	return ErrAlarmLimit
}

// SetAlarm sets the alarm name to be due at at (a time past is due at
// once), replacing one of that name.
func SetAlarm(name string, at time.Time) error {
	return alarmErr(alarmSet(name, at.UnixMilli()))
}

// GetAlarm returns when the alarm name is due, if it is set.
func GetAlarm(name string) (time.Time, bool) {
	ms := alarmGet(name)
	if ms < 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}

// DeleteAlarm deletes the alarm name, if it is set.
func DeleteAlarm(name string) error { return alarmErr(alarmDelete(name)) }

// ListAlarms lists the actor's alarms, by name.
func ListAlarms() []Alarm {
	buf := make([]byte, alarmListLen())
	alarmListRead(buf)
	r := wire.NewReader(buf)
	n := r.Count(16)
	out := make([]Alarm, 0, n)
	for range n {
		out = append(out, readAlarm(r))
	}
	if r.Err() {
		panic("guest: malformed alarm list from the host")
	}
	return out
}

func readAlarm(r *wire.Reader) Alarm {
	return Alarm{Name: r.String(), At: time.UnixMilli(int64(r.U64())), Retry: int(r.U32())}
}

// alarmHandler is the registered alarm handler. Invariant: set only by
// package initialisers.
var alarmHandler func(Alarm) error

// HandleAlarm registers h as the handler of the actor's alarms. Call it
// once, from an init function. Without a handler, a due alarm is given up.
func HandleAlarm(h func(Alarm) error) {
	if alarmHandler != nil {
		panic("guest: HandleAlarm called twice")
	}
	alarmHandler = h
}

func onAlarm() int32 {
	if alarmHandler == nil {
		return wire.NotHandled
	}
	buf := make([]byte, alarmEventLen())
	alarmEventRead(buf)
	r := wire.NewReader(buf)
	a := readAlarm(r)
	if r.Err() {
		return wire.Failed
	}
	if alarmHandler(a) != nil {
		return wire.Failed
	}
	return wire.OK
}
