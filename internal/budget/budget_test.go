package budget

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDivide(t *testing.T) {
	for _, limit := range []int{MinLimit, 1024, 2000, 20000, 1 << 20} {
		d, err := Divide(limit)
		require.NoError(t, err)
		require.Equal(t, limit, d.Reserve+d.Overflow+d.Sockets+d.Conns, "limit %d: %+v", limit, d)
		require.GreaterOrEqual(t, d.Reserve, 64)
		require.GreaterOrEqual(t, d.Overflow, 16)
		require.Greater(t, d.Sockets, d.Conns)
		require.Positive(t, d.Conns)
	}
	d, err := Divide(2000)
	require.NoError(t, err)
	require.Equal(t, Descriptors{Limit: 2000, Reserve: 125, Overflow: 31, Conns: 461, Sockets: 1383}, d)
	_, err = Divide(100)
	require.ErrorContains(t, err, "ulimit -n")
}

func TestFit(t *testing.T) {
	d, err := Divide(2000)
	require.NoError(t, err)
	got, err := d.Fit(0, 0)
	require.NoError(t, err)
	require.Equal(t, d, got)

	got, err = d.Fit(1700, 0)
	require.NoError(t, err)
	require.Equal(t, 1700, got.Sockets)
	require.Equal(t, 2000-125-31-1700, got.Conns, "conns shrink to what is left")

	got, err = d.Fit(100, 200)
	require.NoError(t, err)
	require.Equal(t, 100, got.Sockets)
	require.Equal(t, 200, got.Conns)

	for _, tc := range []struct {
		sockets, conns int
		want           string
	}{
		{50000, 0, "--max-sockets 50000 is over the 1843 descriptors the file limit 2000 leaves"},
		{0, 5000, "--max-conns 5000 is over"},
		{1000, 1000, "add up to 2000, over the 1844"},
	} {
		_, err := d.Fit(tc.sockets, tc.conns)
		require.Error(t, err)
		require.True(t, strings.Contains(err.Error(), tc.want), "%v; want %q", err, tc.want)
	}
}

func TestMemoryAndBodies(t *testing.T) {
	require.Equal(t, int64(64<<20), Bodies(0))
	require.Equal(t, int64(16<<20), Bodies(64<<20))
	require.Equal(t, int64(256<<20), Bodies(64<<30))
	require.Equal(t, int64(128<<20), Bodies(8<<30))
	require.Equal(t, int64(256<<20), Bodies(24<<30), "a 24 GiB machine")
	if m := Memory(); m != 0 {
		require.Greater(t, m, int64(16<<20))
	}
	limit, err := FileLimit()
	require.NoError(t, err)
	require.Positive(t, limit)
}
