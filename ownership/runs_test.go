package ownership

import "testing"

func TestRunNames(t *testing.T) {
	a := Actor{Class: "kv", Name: "a/b"}
	k := RunKey(a, 7, 12)
	if want := "actors/kv/a%2Fb/runs/0000000000000007-000000000000000c"; k != want {
		t.Fatalf("RunKey = %q, want %q", k, want)
	}
	if err := ValidateKey(k); err != nil {
		t.Fatal(err)
	}
	if g, n, ok := ParseRunName(RunName(1<<63, 1<<40)); !ok || g != 1<<63 || n != 1<<40 {
		t.Fatalf("ParseRunName round trip: %d %d %v", g, n, ok)
	}
	for _, bad := range []string{"", "7-12", "0000000000000007_000000000000000c", "000000000000000G-000000000000000c", "0000000000000007-000000000000000C"} {
		if _, _, ok := ParseRunName(bad); ok {
			t.Errorf("ParseRunName(%q) took it", bad)
		}
	}
	if RunName(2, 1) <= RunName(1, 9) {
		t.Fatal("run names do not sort by generation")
	}
}

func TestRunGarbage(t *testing.T) {
	for _, c := range []struct {
		listed bool
		runGen Generation
		want   bool
	}{
		{listed: true, runGen: 3, want: false},
		{listed: true, runGen: 5, want: false},
		{runGen: 6, want: false}, // a later hold's: maybe listed where this hold cannot see
		{runGen: 5, want: false}, // this hold's own: maybe being written
		{runGen: 4, want: true},  // a superseded hold's, never listed again
	} {
		if got := RunGarbage(5, c.listed, c.runGen); got != c.want {
			t.Errorf("RunGarbage(5, listed %v, gen %d) = %v, want %v", c.listed, c.runGen, got, c.want)
		}
	}
}
