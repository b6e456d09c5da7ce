package actorstore

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/ownership"
)

// TestIndexKey: an index key names its alarm whatever the names hold, and
// keeps to the bucket's key rules (no empty, "." or ".." segment); keys
// sort by due time.
func TestIndexKey(t *testing.T) {
	at := time.UnixMilli(1_765_000_000_123)
	for _, tc := range []struct{ class, name, alarm string }{
		{"c", "n", "x"}, {"chat", "a/b", "every/5m"}, {"c", ".", ".."}, {"c", "héllo wörld", "%2F"},
	} {
		a := ownership.Actor{Class: tc.class, Name: tc.name}
		r := AlarmRecord{Alarm: actors.Alarm{Name: tc.alarm, At: at}, Nonce: newNonce()}
		k := IndexKey(a, r)
		for seg := range strings.SplitSeq(k, "/") {
			require.NotContains(t, []string{"", ".", ".."}, seg, k)
		}
		e, err := ParseIndexKey(k)
		require.NoError(t, err)
		require.Equal(t, IndexEntry{Key: k, At: at, Actor: a, Name: tc.alarm, Nonce: r.Nonce}, e)
	}
	early := IndexKey(ownership.Actor{Class: "z", Name: "z"}, AlarmRecord{Alarm: actors.Alarm{Name: "z", At: time.UnixMilli(999)}, Nonce: "00"})
	late := IndexKey(ownership.Actor{Class: "a", Name: "a"}, AlarmRecord{Alarm: actors.Alarm{Name: "a", At: time.UnixMilli(1000)}, Nonce: "00"})
	require.Less(t, early, late)
	_, err := ParseIndexKey("alarms/x/c/n/a/0")
	require.Error(t, err)
}

// TestAlarmRecords: alarms are node keys of the event's writes: set, read,
// listed, deleted, counted against MaxAlarms, taken by DeleteAll, and the
// event's writes list those it set.
func TestAlarmRecords(t *testing.T) {
	tx := newTxn(nil, 1<<20)
	at := time.UnixMilli(5000)
	require.NoError(t, tx.SetAlarm("a", at))
	require.ErrorIs(t, tx.SetAlarm("", at), actors.ErrBadAlarm)
	require.ErrorIs(t, tx.SetAlarm("..", at), actors.ErrBadAlarm)
	require.ErrorIs(t, tx.SetAlarm("a\nb", at), actors.ErrBadAlarm)
	r, ok, err := tx.Alarm("a")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, at, r.At)
	require.Len(t, r.Nonce, 16)
	require.Len(t, tx.AlarmsSet(), 1)
	list, err := tx.List(actors.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, list, "a class's list never shows the node's keys")

	for i := 1; i < actors.MaxAlarms; i++ {
		require.NoError(t, tx.SetAlarm(strings.Repeat("x", i%200+1)+string(rune('a'+i%26))+time.Duration(i).String(), at))
	}
	require.ErrorIs(t, tx.SetAlarm("one too many", at), actors.ErrLimit)
	require.NoError(t, tx.SetAlarm("a", at.Add(time.Second)), "setting one that is set again is not one more")
	require.NoError(t, tx.DeleteAll())
	all, err := tx.Alarms()
	require.NoError(t, err)
	require.Empty(t, all)
}
