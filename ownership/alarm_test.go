package ownership

import (
	"testing"
	"time"
)

func TestJudgeAlarm(t *testing.T) {
	now := time.Unix(1000, 0)
	set := AlarmSet{Nonce: "a1", At: now}
	for _, c := range []struct {
		name    string
		cur     AlarmSet
		present bool
		now     time.Time
		want    AlarmVerdict
	}{
		{"its set, due", set, true, now, AlarmFire},
		{"its set, past due", set, true, now.Add(time.Hour), AlarmFire},
		{"its set, not due by this clock", set, true, now.Add(-time.Millisecond), AlarmNotDue},
		{"deleted, or never landed", AlarmSet{}, false, now, AlarmGone},
		{"set again since", AlarmSet{Nonce: "a2", At: now}, true, now, AlarmGone},
		{"set again, later", AlarmSet{Nonce: "a2", At: now.Add(time.Hour)}, true, now, AlarmGone},
	} {
		if got := JudgeAlarm(set, c.cur, c.present, c.now); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestAlarmEnds(t *testing.T) {
	if !AlarmEnds("a1", AlarmSet{Nonce: "a1"}, true) {
		t.Error("a fired alarm the handler left alone does not end")
	}
	if AlarmEnds("a1", AlarmSet{Nonce: "a2"}, true) {
		t.Error("an alarm the handler set again ends")
	}
	if AlarmEnds("a1", AlarmSet{}, false) {
		t.Error("an alarm the handler deleted is deleted again")
	}
}

func TestAlarmEntryDone(t *testing.T) {
	for _, v := range []AlarmVerdict{0, AlarmFire, AlarmGone, AlarmNotDue} {
		for _, durable := range []bool{false, true} {
			want := durable && (v == AlarmFire || v == AlarmGone)
			if got := AlarmEntryDone(v, durable); got != want {
				t.Errorf("AlarmEntryDone(%v, durable %v) = %v, want %v", v, durable, got, want)
			}
		}
	}
}
