package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestParseEvents(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    GroupEvents
		wantErr bool
	}{
		{name: "empty_group", in: "populated 0\nfrozen 0\n", want: GroupEvents{}},
		{name: "populated", in: "populated 1\nfrozen 0\n", want: GroupEvents{Populated: true}},
		{name: "frozen_and_populated", in: "populated 1\nfrozen 1\n", want: GroupEvents{Populated: true, Frozen: true}},
		{name: "unknown_key_ignored", in: "populated 1\nsomething 7\n", want: GroupEvents{Populated: true}},
		{name: "no_value", in: "populated\n", wantErr: true},
		{name: "not_a_number", in: "populated yes\n", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseEvents([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseEvents(%q) error = %v, want error %v", tc.in, err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("ParseEvents(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseCPUStat(t *testing.T) {
	in := "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\nnice_usec 0\nnr_periods 10\nnr_throttled 3\nthrottled_usec 2500\n"
	got, err := ParseCPUStat([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := CPUStat{
		Usage: 1500 * time.Microsecond, User: time.Millisecond, System: 500 * time.Microsecond,
		Periods: 10, Throttled: 3, ThrottledTime: 2500 * time.Microsecond,
	}
	if got != want {
		t.Errorf("ParseCPUStat = %+v, want %+v", got, want)
	}
}

func TestCPUMax(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		want      CPUMax
		wantMilli int64
		wantStr   string
		wantErr   bool
	}{
		{name: "max_alone", in: "max", want: CPUMax{Period: 100000}, wantStr: "max 100000"},
		{name: "max_with_period", in: "max 100000\n", want: CPUMax{Period: 100000}, wantStr: "max 100000"},
		{name: "half_core", in: "50000 100000", want: CPUMax{Quota: 50000, Period: 100000}, wantMilli: 500, wantStr: "50000 100000"},
		{name: "two_cores_other_period", in: "100000 50000", want: CPUMax{Quota: 100000, Period: 50000}, wantMilli: 2000, wantStr: "100000 50000"},
		{name: "garbage_quota", in: "lots 100000", wantErr: true},
		{name: "zero_period", in: "max 0", wantErr: true},
		{name: "three_fields", in: "1 2 3", wantErr: true},
		{name: "empty", in: "", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseCPUMax(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseCPUMax(%q) error = %v, want error %v", tc.in, err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if got != tc.want {
				t.Errorf("ParseCPUMax(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
			if m := got.Milli(); m != tc.wantMilli {
				t.Errorf("ParseCPUMax(%q).Milli() = %d, want %d", tc.in, m, tc.wantMilli)
			}
			if s := got.String(); s != tc.wantStr {
				t.Errorf("ParseCPUMax(%q).String() = %q, want %q", tc.in, s, tc.wantStr)
			}
		})
	}
}

func TestCPUMaxFromMilliRoundTrips(t *testing.T) {
	for _, milli := range []int64{0, 10, 250, 1000, 1500, 2000, 64000} {
		c := CPUMaxFromMilli(milli)
		if c.Period != 100000 {
			t.Errorf("CPUMaxFromMilli(%d).Period = %d, want 100000", milli, c.Period)
		}
		back, err := ParseCPUMax(c.String())
		if err != nil {
			t.Fatalf("ParseCPUMax(%q): %v", c.String(), err)
		}
		if got := back.Milli(); got != milli {
			t.Errorf("CPUMaxFromMilli(%d) = %q, reads back as %d", milli, c.String(), got)
		}
	}
}

func TestParseMax(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    int64
		wantErr bool
	}{
		{name: "max_is_no_limit", in: "max\n", want: 0},
		{name: "count", in: "1024\n", want: 1024},
		{name: "negative", in: "-1", wantErr: true},
		{name: "garbage", in: "lots", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseMax(tc.in)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("ParseMax(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.wantErr)
			}
		})
	}
	if FormatMax(0) != "max" || FormatMax(10) != "10" {
		t.Errorf("FormatMax(0), FormatMax(10) = %q, %q; want \"max\", \"10\"", FormatMax(0), FormatMax(10))
	}
}

// fakeGroup makes a directory shaped like a cgroup group: each interface
// file a regular file with the given content.
func fakeGroup(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestWriteFileNeverCreates(t *testing.T) {
	dir := t.TempDir()
	err := WriteFile(dir, "pids.max", "10")
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("WriteFile of a missing file: error = %v, want ErrNotFound", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pids.max")); err == nil {
		t.Error("WriteFile created the file")
	}
}
