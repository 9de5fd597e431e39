package quantity

import (
	"math"
	"testing"
)

func TestBytes(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{0, "0B"},
		{1023, "1023B"},
		{1024, "1KiB"},
		{1536, "1.5KiB"},
		{268435456, "256MiB"},
		{104857600, "100MiB"},
		{150 << 20, "150MiB"},
		{8 << 30, "8GiB"},
		{(8 << 30) + (300 << 20), "8.3GiB"},
		{math.MaxInt64, "8EiB"},
	}
	for _, tc := range tests {
		if got := Bytes(tc.n); got != tc.want {
			t.Errorf("Bytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
