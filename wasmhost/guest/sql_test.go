package guest

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/wasmkeep/wasmkeep/wasmhost/internal/wire"
)

func TestEncodeStatement(t *testing.T) {
	b, err := encodeStatement("q", []any{nil, true, int8(-1), uint32(7), uint64(math.MaxInt64), float32(0.5), "s", []byte{}}, wire.SQLFlagExec)
	if err != nil {
		t.Fatal(err)
	}
	want := wire.AppendString(nil, "q")
	want = wire.AppendU32(want, 8)
	want = append(want, wire.SQLNull)
	want = wire.AppendU64(append(want, wire.SQLInteger), 1)
	want = wire.AppendU64(append(want, wire.SQLInteger), math.MaxUint64)
	want = wire.AppendU64(append(want, wire.SQLInteger), 7)
	want = wire.AppendU64(append(want, wire.SQLInteger), math.MaxInt64)
	want = wire.AppendU64(append(want, wire.SQLFloat), math.Float64bits(0.5))
	want = wire.AppendString(append(want, wire.SQLText), "s")
	want = wire.AppendString(append(want, wire.SQLBlob), "")
	want = wire.AppendU32(want, wire.SQLFlagExec)
	if !bytes.Equal(b, want) {
		t.Fatalf("encodeStatement =\n%v, want\n%v", b, want)
	}
	for _, bad := range []any{uint64(math.MaxInt64 + 1), struct{}{}, []string{}} {
		_, err := encodeStatement("q", []any{1, bad}, 0)
		var e *SQLError
		if !errors.As(err, &e) || e.Message != "guest: SQL argument 2 is not an SQL value (nil, a bool, an integer up to 2^63-1, a float, a string or a []byte)" {
			t.Errorf("encodeStatement of a %T: err = %v", bad, err)
		}
	}
}

func TestDecodeSQLResult(t *testing.T) {
	b := []byte{wire.SQLDone}
	b = wire.AppendU64(b, 2)
	b = wire.AppendU64(b, math.MaxUint64)
	b = wire.AppendU32(b, 2)
	b = wire.AppendString(wire.AppendString(b, "a"), "b")
	b = wire.AppendU32(b, 2)
	b = wire.AppendU64(append(b, wire.SQLInteger), 5)
	b = wire.AppendU64(append(b, wire.SQLFloat), math.Float64bits(-0.25))
	b = wire.AppendString(append(b, wire.SQLText), "t")
	b = append(b, wire.SQLNull)
	res, rows, refused, ok := decodeSQLResult(b)
	wantRows := &Rows{Columns: []string{"a", "b"}, Rows: [][]any{{int64(5), -0.25}, {"t", nil}}}
	if !ok || refused != nil || res != (Result{RowsAffected: 2, LastInsertID: -1}) || !reflect.DeepEqual(rows, wantRows) {
		t.Fatalf("decodeSQLResult = %+v, %+v, %v, %v", res, rows, refused, ok)
	}

	for status, limit := range map[byte]bool{wire.SQLError: false, wire.SQLLimit: true} {
		_, _, refused, ok := decodeSQLResult(wire.AppendString([]byte{status}, "why"))
		if !ok || refused == nil || refused.Error() != "why" || errors.Is(refused, ErrLimit) != limit {
			t.Fatalf("status %d: %v, %v", status, refused, ok)
		}
	}

	header := func(cols, rows uint32) []byte {
		h := wire.AppendU64(wire.AppendU64([]byte{wire.SQLDone}, 0), 0)
		h = wire.AppendU32(h, cols)
		for range cols {
			h = wire.AppendString(h, "c")
		}
		return wire.AppendU32(h, rows)
	}
	for name, bad := range map[string][]byte{
		"empty":           nil,
		"unknown status":  {3},
		"short":           b[:len(b)-1],
		"left over":       append(b[:len(b):len(b)], 0),
		"unknown type":    append(header(1, 1), 9),
		"rows, no column": header(0, 1),
		"too many rows":   header(1, 1<<20),
		"short message":   {wire.SQLError, 9, 0, 0, 0},
	} {
		if _, _, _, ok := decodeSQLResult(bad); ok {
			t.Errorf("%s: decodeSQLResult accepted %v", name, bad)
		}
	}
}

func TestItoa(t *testing.T) {
	for n, want := range map[int]string{0: "0", 7: "7", 10: "10", 1234567890: "1234567890"} {
		if got := itoa(n); got != want {
			t.Errorf("itoa(%d) = %q", n, got)
		}
	}
}
