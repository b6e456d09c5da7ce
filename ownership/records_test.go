package ownership

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestRecordsRoundTrip(t *testing.T) {
	recs := []Record{
		{Class: "room", Name: "lobby", Node: "n1", Instance: "i-1", Generation: 1, Held: true, Nonce: "i-1-1"},
		{Class: "c l/a%ss", Name: "ünï cødé ~ . ..", Node: "node.a_b-c", Instance: "x", Generation: 1 << 62, Held: false, Nonce: "n"},
		{Class: "c", Name: "", Node: "n", Instance: "i", Generation: 3, Held: true, Nonce: ""},
	}
	for _, r := range recs {
		got, err := DecodeRecord(EncodeRecord(r))
		if err != nil || got != r {
			t.Errorf("record %+v: round trip gave %+v, %v", r, got, err)
		}
	}
	l := Lease{Node: "n1", Instance: "i 1", Addr: "127.0.0.1:8080", TTLMilli: 10000, State: LeaseDraining, Seq: 9, Nonce: "z", WrittenAt: 1700000000000, Held: 3, Parked: 2}
	if got, err := DecodeLease(EncodeLease(l)); err != nil || got != l {
		t.Errorf("lease: round trip gave %+v, %v", got, err)
	}
	m := MoveRequest{Class: "room", Name: "a b", Target: "n2", From: "n1", FromInstance: "n1.a", Generation: 7, By: "operator", Nonce: "q"}
	if got, err := DecodeMove(EncodeMove(m)); err != nil || got != m {
		t.Errorf("move: round trip gave %+v, %v", got, err)
	}
	if s := string(EncodeRecord(recs[1])); strings.ContainsAny(s, "\n/") || !strings.HasPrefix(s, "wk1 owner ") {
		t.Errorf("encoded record %q: want one line of escaped fields", s)
	}
}

func TestUnreadableRecords(t *testing.T) {
	good := string(EncodeRecord(Record{Class: "c", Name: "n", Node: "n1", Instance: "i", Generation: 2, Held: true, Nonce: "x"}))
	cases := map[string]string{
		"empty":           "",
		"json":            `{"class":"c"}`,
		"future version":  strings.Replace(good, "wk1", "wk2", 1),
		"other kind":      strings.Replace(good, " owner ", " lease ", 1),
		"missing field":   good[:strings.LastIndexByte(good, ' ')],
		"extra field":     good + " more",
		"bad number":      strings.Replace(good, " 2 ", " two ", 1),
		"bad held flag":   strings.Replace(good, " 2 1 ", " 2 7 ", 1),
		"bad escape":      strings.Replace(good, " c ", " %G1 ", 1),
		"zero generation": strings.Replace(good, " 2 1 ", " 0 1 ", 1),
		"binary":          "\x00\xff\xfe",
	}
	for name, body := range cases {
		if _, err := DecodeRecord([]byte(body)); !errors.Is(err, ErrUnreadable) {
			t.Errorf("%s: DecodeRecord(%q) = %v, want ErrUnreadable", name, body, err)
		}
	}
	if _, err := DecodeLease([]byte(strings.Replace(string(EncodeLease(Lease{Node: "n", Instance: "i", State: LeaseLive})), " live ", " sleepy ", 1))); !errors.Is(err, ErrUnreadable) {
		t.Errorf("a lease with an unknown state decoded: %v", err)
	}
}

func TestKeys(t *testing.T) {
	seen := map[string]string{}
	names := []string{"", ".", "..", "a/b", "a%2Fb", "~", "a b", "ü", strings.Repeat("x", 300), strings.Repeat("x", 301), strings.Repeat("é", 150)}
	for _, n := range names {
		k := OwnerKey(Actor{Class: "room", Name: n})
		if err := ValidateKey(k); err != nil {
			t.Errorf("name %q: key %q invalid: %v", n, k, err)
		}
		seg := k[len("owners/room/"):]
		if strings.Contains(seg, "/") || seg == "." || seg == ".." || seg == "" || len(seg) > maxSegment {
			t.Errorf("name %q: unsafe segment %q", n, seg)
		}
		if other, dup := seen[k]; dup {
			t.Errorf("names %q and %q share the key %q", other, n, k)
		}
		seen[k] = n
		if len(EscapeSegment(n)) <= maxSegment {
			if a, ok := ActorFromOwnerKey(k); !ok || a.Name != n {
				t.Errorf("name %q: key %q reads back as %q, %v", n, k, a.Name, ok)
			}
		}
	}
}

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig("n1", "i1")
	if err := ok.Validate(); err != nil {
		t.Fatalf("defaults refused: %v", err)
	}
	bad := map[string]func(*Config){
		"empty node":                  func(c *Config) { c.Node = "" },
		"node with a slash":           func(c *Config) { c.Node = "a/b" },
		"empty instance":              func(c *Config) { c.Instance = "" },
		"period too long for the ttl": func(c *Config) { c.LeasePeriod = 7 * time.Second },
		"safety as long as the ttl":   func(c *Config) { c.Safety = c.LeaseTTL },
		"resolver watch too short":    func(c *Config) { c.ResolverWatch = c.AttemptTimeout },
		"backoff cap below its start": func(c *Config) { c.ReleaseBackoffMax = c.ReleaseBackoff / 2 },
		"no attempt timeout":          func(c *Config) { c.AttemptTimeout = 0 },
		"negative grace":              func(c *Config) { c.Grace = -time.Second },
		"zero sweep batch":            func(c *Config) { c.SweepBatch = 0 },
	}
	for name, mutate := range bad {
		c := ok
		mutate(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
		if _, err := NewCore(c); err == nil {
			t.Errorf("%s: NewCore accepted it", name)
		}
	}
}

// FuzzDecode feeds arbitrary bytes to the decoders of everything the core
// reads from the bucket. None panics, and what each refuses is unreadable,
// which is a damaged object (ErrUnreadable, ErrDamaged).
func FuzzDecode(f *testing.F) {
	f.Add(EncodeLease(Lease{Node: "n", Instance: "i", Addr: "a:1", TTLMilli: 10000, State: LeaseLive, Seq: 1, Nonce: "x"}))
	f.Add(EncodeRecord(Record{Class: "c", Name: "n", Node: "n", Instance: "i", Generation: 2, Held: true, Nonce: "x"}))
	f.Add(EncodeState(StateHeader{Gen: 1, Seq: 2}, []byte("payload")))
	f.Add([]byte("wk1 state 1\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(what string, err error) {
			if err != nil && (!errors.Is(err, ErrUnreadable) || !errors.Is(err, ErrDamaged)) {
				t.Fatalf("%s of %q: %v, want ErrUnreadable and ErrDamaged", what, data, err)
			}
		}
		_, err := DecodeLease(data)
		check("DecodeLease", err)
		_, err = DecodeRecord(data)
		check("DecodeRecord", err)
		_, err = DecodeMove(data)
		check("DecodeMove", err)
		_, _, err = DecodeState(data)
		check("DecodeState", err)
	})
}

func TestNodeClassesRoundTrip(t *testing.T) {
	for _, c := range []NodeClasses{
		{Node: "n1", Instance: "i1"},
		{Node: "n1", Instance: "i1", Classes: []string{"chat", "counter", "a b%c"}},
	} {
		got, err := DecodeNodeClasses(EncodeNodeClasses(c))
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if got.Node != c.Node || got.Instance != c.Instance || len(got.Classes) != len(c.Classes) {
			t.Fatalf("round trip: %+v, want %+v", got, c)
		}
		for i := range c.Classes {
			if got.Classes[i] != c.Classes[i] {
				t.Fatalf("class %d: %q, want %q", i, got.Classes[i], c.Classes[i])
			}
		}
	}
	for _, bad := range []string{
		"", "wk1 classes n1 i1", "wk1 classes n1 i1 2 a", "wk1 classes n1 i1 1 a b", "wk1 classes n1 i1 x a",
		"wk1 lease n1 i1 0", "wk1 classes ~ i1 0",
	} {
		if _, err := DecodeNodeClasses([]byte(bad)); !errors.Is(err, ErrUnreadable) {
			t.Errorf("%q: %v, want unreadable", bad, err)
		}
	}
}
