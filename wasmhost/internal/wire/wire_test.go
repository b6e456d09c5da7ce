package wire

import "testing"

func TestRoundTrip(t *testing.T) {
	var b []byte
	b = AppendU32(b, 0xdeadbeef)
	b = AppendString(b, "héllo")
	b = AppendBytes(b, nil)
	b = AppendString(b, "skipped")
	b = AppendU32(b, 2)
	r := NewReader(b)
	if v := r.U32(); v != 0xdeadbeef {
		t.Fatalf("U32 = %#x", v)
	}
	if s := r.String(); s != "héllo" {
		t.Fatalf("String = %q", s)
	}
	if p := r.Bytes(); len(p) != 0 {
		t.Fatalf("Bytes = %q", p)
	}
	r.Skip()
	if n := r.Count(0); n != 2 {
		t.Fatalf("Count = %d", n)
	}
	if r.Err() {
		t.Fatal("Err after a full read")
	}
}

func TestShortAndOversized(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
		read func(*Reader)
	}{
		{"short u32", []byte{1, 2}, func(r *Reader) { r.U32() }},
		{"string past end", AppendU32(nil, 10), func(r *Reader) { _ = r.String() }},
		{"bytes past end", append(AppendU32(nil, 3), 'a'), func(r *Reader) { r.Bytes() }},
		{"skip past end", append(AppendU32(nil, 3), 'a'), func(r *Reader) { r.Skip() }},
		{"count past end", AppendU32(nil, 1<<30), func(r *Reader) { r.Count(8) }},
		{"left over", []byte{0, 0, 0, 0, 9}, func(r *Reader) { r.U32() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(tt.b)
			tt.read(r)
			if !r.Err() {
				t.Fatal("Err = false")
			}
		})
	}
}

func TestU8U64(t *testing.T) {
	b := append(AppendU64(nil, 0x0102030405060708), 7)
	r := NewReader(b)
	if v := r.U64(); v != 0x0102030405060708 {
		t.Fatalf("U64 = %#x", v)
	}
	if v := r.U8(); v != 7 || r.Err() {
		t.Fatalf("U8 = %d, Err %v", v, r.Err())
	}
	if r.U8(); !r.Err() {
		t.Fatal("U8 past the end: no Err")
	}
}
