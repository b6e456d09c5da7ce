package ownership

import "testing"

func TestGate(t *testing.T) {
	yes, no := func() bool { return true }, func() bool { return false }
	for _, tc := range []struct {
		name string
		e    EventEnd
		want Gated
	}{
		{"a write that landed, hold live", EventEnd{Wrote: true, Commit: Landed, MayAct: yes}, GateRelease},
		{"a write that landed, hold ended", EventEnd{Wrote: true, Commit: Landed, MayAct: no}, GateRelease},
		{"a call, then nothing to commit, hold ended", EventEnd{Earlier: true, Commit: Landed, MayAct: no}, GateRelease},
		{"a read, hold live", EventEnd{Commit: Landed, MayAct: yes}, GateRelease},
		{"a read, hold ended", EventEnd{Commit: Landed, MayAct: no}, GateRefuse},
		{"a write refused", EventEnd{Wrote: true, Commit: Refused}, GateRefuse},
		{"a write never sent", EventEnd{Wrote: true, Commit: Failed}, GateRefuse},
		{"a write without an answer", EventEnd{Wrote: true, Commit: Unknown}, GateUnknown},
		{"a write on a damaged bucket", EventEnd{Wrote: true, Commit: BucketDamaged}, GateUnknown},
		{"a read whose commit had no answer", EventEnd{Commit: Unknown}, GateRefuse},
		{"a call, then a refused commit", EventEnd{Earlier: true, Wrote: true, Commit: Refused}, GateUnknown},
	} {
		if got := Gate(tc.e); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestJudgeLostCommit(t *testing.T) {
	sent := EncodeState(StateHeader{Gen: 2, Seq: 5}, []byte("new"))
	sameHeader := EncodeState(StateHeader{Gen: 2, Seq: 5}, []byte("sealed"))
	for _, tc := range []struct {
		name       string
		found      bool
		read       []byte
		etag, prev ETag
		want       LostCommit
	}{
		{"its own bytes", true, sent, "e2", "e1", LostLanded},
		{"the version it was conditioned on", true, []byte("wk1 state 2 4\nold"), "e1", "e1", LostFence},
		{"a seal stamped the same, another content", true, sameHeader, "e3", "e1", LostUnknown},
		{"another version", true, []byte("wk1 state 3 1\nx"), "e4", "e1", LostUnknown},
		{"a first commit, still absent", false, nil, "", "", LostFence},
		{"a commit over an object now absent", false, nil, "", "e1", LostUnknown},
	} {
		if got := JudgeLostCommit(tc.found, tc.read, tc.etag, sent, tc.prev); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
