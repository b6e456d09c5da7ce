package actors

import (
	"context"
	"errors"
	"time"
)

// Alarms. An actor may keep named alarms, each a time at which the node
// delivers it an Alarm event (HandleAlarm of a class that is an
// AlarmHandler), waking it if it sleeps, wherever in the cluster it is
// held or next acquired. Setting, re-setting and deleting an alarm are
// writes of the event, committed with its other writes: an event whose
// commit fails leaves no alarm of its own, and DeleteAll deletes the
// actor's alarms with its storage.
//
// Delivery is at least once. An alarm past due fires at once, after a
// restart too. Its event ends it: the alarm is deleted when the event's
// writes land, unless the event set it again (a repeating alarm sets
// itself for the next time). An event that fails, or whose node dies
// before its commit, is delivered again, after 2 s, then 4, 8, 16, 32 and
// 64 (Alarm.Retry counts the failed deliveries); after those six retries
// the alarm is given up and deleted.

// MaxAlarms bounds the alarms one actor keeps; MaxAlarmName the length of
// an alarm's name, in bytes.
const (
	MaxAlarms    = 1000
	MaxAlarmName = 256
)

// Alarm is one named alarm of an actor.
type Alarm struct {
	Name string
	At   time.Time // when it is due (to the millisecond)
	// Retry, in an Alarm event, is how many deliveries of it failed
	// before this one.
	Retry int
}

// AlarmHandler is a class (or a Resident) whose actors have alarms: the
// node calls HandleAlarm when one is due. An error fails the event: its
// writes are discarded and the alarm is delivered again later.
type AlarmHandler interface {
	HandleAlarm(ctx context.Context, alarm Alarm, st Storage) error
}

// ErrAlarmsNotHandled, returned by HandleAlarm (or by a wasm guest with no
// alarm handler), gives the alarm up at once instead of retrying it: the
// class has nothing to run for it.
var ErrAlarmsNotHandled = errors.New("the class handles no alarms")

// ErrBadAlarm is matched (errors.Is) by an alarm's name that is empty,
// longer than MaxAlarmName, "." or "..", or holds control characters.
var ErrBadAlarm = errors.New("bad alarm name")

// SetAlarm sets the event's actor's alarm name to fire at at (a time
// past fires at once), replacing one of that name. ctx is the event's.
func SetAlarm(ctx context.Context, name string, at time.Time) error {
	ev := eventOf(ctx)
	if ev == nil {
		return ErrNotInEvent
	}
	return ev.SetAlarm(name, at)
}

// GetAlarm returns when the alarm name is due, if it is set.
func GetAlarm(ctx context.Context, name string) (time.Time, bool, error) {
	ev := eventOf(ctx)
	if ev == nil {
		return time.Time{}, false, ErrNotInEvent
	}
	return ev.GetAlarm(name)
}

// DeleteAlarm deletes the alarm name, if it is set.
func DeleteAlarm(ctx context.Context, name string) error {
	ev := eventOf(ctx)
	if ev == nil {
		return ErrNotInEvent
	}
	return ev.DeleteAlarm(name)
}

// ListAlarms lists the actor's alarms, by name.
func ListAlarms(ctx context.Context) ([]Alarm, error) {
	ev := eventOf(ctx)
	if ev == nil {
		return nil, ErrNotInEvent
	}
	return ev.ListAlarms()
}
