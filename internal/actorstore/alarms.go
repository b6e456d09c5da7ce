package actorstore

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/ownership"
)

// An actor's alarms are node keys of its storage, so that setting,
// re-setting and deleting one commit with the event's other writes, and
// DeleteAll takes them:
//
//	NodePrefix+"alarm/"+<name>  ->  at: 8 bytes, Unix ms, big-endian
//	                                retry: 4 bytes, big-endian
//	                                nonce: 8 bytes
//
// The nonce is new at each set: an entry of the bucket's alarm index
// (IndexKey) names the nonce of the set it was written for, so an entry
// left by an earlier set of the same name at the same time is told apart
// from the entry of the set that stands.
const alarmPrefix = actors.NodePrefix + "alarm/"

// AlarmRecord is one alarm as its actor keeps it.
type AlarmRecord struct {
	actors.Alarm
	Nonce string // 16 hex digits
}

// Set is the set of the alarm the record keeps, as ownership's delivery
// rules name it.
func (r AlarmRecord) Set() ownership.AlarmSet { return ownership.AlarmSet{Nonce: r.Nonce, At: r.At} }

// errAlarm marks an alarm record that cannot be decoded.
var errAlarm = errors.New("alarm record damaged")

func encodeAlarm(at time.Time, retry int, nonce string) []byte {
	b := make([]byte, 0, 20)
	b = binary.BigEndian.AppendUint64(b, uint64(at.UnixMilli()))
	b = binary.BigEndian.AppendUint32(b, uint32(retry))
	n, _ := hex.DecodeString(nonce)
	return append(b, n...)
}

func decodeAlarm(name string, v []byte) (AlarmRecord, error) {
	if len(v) != 20 {
		return AlarmRecord{}, fmt.Errorf("alarm %q: %d bytes, want 20: %w", name, len(v), errAlarm)
	}
	return AlarmRecord{
		Alarm: actors.Alarm{Name: name, At: time.UnixMilli(int64(binary.BigEndian.Uint64(v))), Retry: int(binary.BigEndian.Uint32(v[8:]))},
		Nonce: hex.EncodeToString(v[12:]),
	}, nil
}

// CheckAlarmName checks an alarm's name: 1 to MaxAlarmName bytes of UTF-8
// without control characters, not "." or "..".
func CheckAlarmName(name string) error {
	switch {
	case name == "" || len(name) > actors.MaxAlarmName:
		return fmt.Errorf("%w: alarm name of %d bytes: want 1 to %d", actors.ErrBadAlarm, len(name), actors.MaxAlarmName)
	case name == "." || name == "..":
		return fmt.Errorf("%w: alarm name %q", actors.ErrBadAlarm, name)
	case !utf8.ValidString(name) || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fmt.Errorf("%w: alarm name %q: want UTF-8 without control characters", actors.ErrBadAlarm, name)
	}
	return nil
}

// newNonce is a fresh alarm nonce.
func newNonce() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// SetAlarm sets the alarm name to fire at at, a first delivery (retry 0),
// replacing one of that name. An actor has at most actors.MaxAlarms.
func (t *Txn) SetAlarm(name string, at time.Time) error {
	if err := CheckAlarmName(name); err != nil {
		return err
	}
	if _, ok := t.nodeGet(alarmPrefix + name); !ok {
		if n := len(t.nodeList(actors.ListOptions{Prefix: alarmPrefix})); n >= actors.MaxAlarms {
			return fmt.Errorf("%w: the actor has %d alarms, the most it may have", actors.ErrLimit, n)
		}
	}
	return t.putAlarm(name, at, 0)
}

// RetryAlarm sets the alarm name again for a delivery after retry failed
// ones, with a new nonce.
func (t *Txn) RetryAlarm(name string, at time.Time, retry int) error {
	return t.putAlarm(name, at, retry)
}

func (t *Txn) putAlarm(name string, at time.Time, retry int) error {
	t.alarmed = true
	return t.nodePut(alarmPrefix+name, encodeAlarm(at, retry, newNonce()))
}

// Alarm reads the alarm name, if set.
func (t *Txn) Alarm(name string) (AlarmRecord, bool, error) {
	v, ok := t.nodeGet(alarmPrefix + name)
	if !ok {
		return AlarmRecord{}, false, nil
	}
	r, err := decodeAlarm(name, v)
	return r, err == nil, err
}

// DeleteAlarm deletes the alarm name, if set.
func (t *Txn) DeleteAlarm(name string) {
	if _, ok := t.nodeGet(alarmPrefix + name); ok {
		t.nodeDelete(alarmPrefix + name)
	}
}

// Alarms lists the actor's alarms by name.
func (t *Txn) Alarms() ([]AlarmRecord, error) {
	var out []AlarmRecord
	for _, e := range t.nodeList(actors.ListOptions{Prefix: alarmPrefix}) {
		r, err := decodeAlarm(strings.TrimPrefix(e.Key, alarmPrefix), e.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// AlarmsSet lists the alarms the event's writes set (or set again): each
// needs its entry in the bucket's alarm index before the commit that
// carries it (IndexKey).
func (t *Txn) AlarmsSet() []AlarmRecord {
	if !t.alarmed {
		return nil // the writes of an event that set none are not looked at
	}
	var out []AlarmRecord
	for k, v := range t.writes {
		if v == nil || !strings.HasPrefix(k, alarmPrefix) {
			continue
		}
		if r, err := decodeAlarm(strings.TrimPrefix(k, alarmPrefix), v); err == nil {
			out = append(out, r)
		}
	}
	return out
}

// The bucket's alarm index: one empty object per alarm set, named by when
// it is due, so that a node finds the alarms due now by listing the start
// of the index, whatever the number of alarms due later:
//
//	alarms/<at: Unix ms, 15 digits>/<class>/<name>/<alarm>/<nonce>
//
// with the class, the actor's name and the alarm's name path-escaped. An
// entry is written before the commit that sets its alarm, and deleted once
// the alarm was delivered, moved or found gone: an entry whose alarm is
// not in its actor's state (a commit that did not land, a set since) is a
// hint that costs one delivery, never an alarm.
const IndexPrefix = "alarms/"

// IndexKey is the index entry of a's alarm r.
func IndexKey(a ownership.Actor, r AlarmRecord) string {
	ms := max(r.At.UnixMilli(), 0)
	return fmt.Sprintf("%s%015d/%s/%s/%s/%s", IndexPrefix, ms, escapeSegment(a.Class), escapeSegment(a.Name), escapeSegment(r.Name), r.Nonce)
}

// escapeSegment path-escapes s, and its dots when it is "." or "..".
func escapeSegment(s string) string {
	e := url.PathEscape(s)
	if e == "." || e == ".." {
		e = strings.ReplaceAll(e, ".", "%2E")
	}
	return e
}

// IndexEntry is what an index key names.
type IndexEntry struct {
	Key   string
	At    time.Time
	Actor ownership.Actor
	Name  string
	Nonce string
}

// Set is the set of the alarm the entry was written for.
func (e IndexEntry) Set() ownership.AlarmSet { return ownership.AlarmSet{Nonce: e.Nonce, At: e.At} }

// ParseIndexKey reads an index key.
func ParseIndexKey(key string) (IndexEntry, error) {
	parts := strings.Split(strings.TrimPrefix(key, IndexPrefix), "/")
	if !strings.HasPrefix(key, IndexPrefix) || len(parts) != 5 {
		return IndexEntry{}, fmt.Errorf("alarm index key %q: not %s<at>/<class>/<name>/<alarm>/<nonce>", key, IndexPrefix)
	}
	ms, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil {
		return IndexEntry{}, fmt.Errorf("alarm index key %q: %w", key, err)
	}
	var seg [3]string
	for i := range seg {
		if seg[i], err = url.PathUnescape(parts[i+1]); err != nil {
			return IndexEntry{}, fmt.Errorf("alarm index key %q: %w", key, err)
		}
	}
	return IndexEntry{Key: key, At: time.UnixMilli(ms), Actor: ownership.Actor{Class: seg[0], Name: seg[1]}, Name: seg[2], Nonce: parts[4]}, nil
}
