package pressure

import (
	"errors"
	"testing"
)

func TestParsePSI(t *testing.T) {
	for _, tc := range []struct {
		name       string
		data       string
		some, full int
		ok         bool
	}{
		{"both_lines", "some avg10=21.83 avg60=35.95 avg300=14.49 total=70350608\nfull avg10=0.07 avg60=0.00 avg300=0.00 total=0\n", 2183, 7, true},
		{"cpu_without_full", "some avg10=1.5 avg60=0.00 avg300=0.00 total=5\n", 150, 0, true},
		{"hundred_percent", "some avg10=100.00 avg60=0 avg300=0 total=1\nfull avg10=100.00 avg60=0 avg300=0 total=1\n", 10000, 10000, true},
		{"no_some_line", "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", 0, 0, false},
		{"no_avg10", "some avg60=0.00 total=0\n", 0, 0, false},
		{"not_a_number", "some avg10=x.00 avg60=0.00 avg300=0.00 total=0\n", 0, 0, false},
		{"above_hundred", "some avg10=101.00 avg60=0.00 avg300=0.00 total=0\n", 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			some, full, err := ParsePSI([]byte(tc.data))
			if (err == nil) != tc.ok || some != tc.some || full != tc.full {
				t.Fatalf("ParsePSI = %d, %d, %v; want %d, %d, ok %v", some, full, err, tc.some, tc.full, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrNoSignal) {
				t.Fatalf("error %v does not wrap %v", err, ErrNoSignal)
			}
		})
	}
}

func TestParseMeminfo(t *testing.T) {
	for _, tc := range []struct {
		name         string
		data         string
		total, avail int64
		ok           bool
	}{
		{"linux", "MemTotal:       24684520 kB\nMemFree:        24000000 kB\nMemAvailable:   24408332 kB\n", 24684520 << 10, 24408332 << 10, true},
		{"no_available", "MemTotal:       1024 kB\nMemFree:        512 kB\n", 0, 0, false},
		{"bad_unit", "MemTotal:       1024 MB\nMemAvailable:   512 kB\n", 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			total, avail, err := ParseMeminfo([]byte(tc.data))
			if (err == nil) != tc.ok || total != tc.total || avail != tc.avail {
				t.Fatalf("ParseMeminfo = %d, %d, %v; want %d, %d, ok %v", total, avail, err, tc.total, tc.avail, tc.ok)
			}
		})
	}
}
