package cgroup

import (
	"errors"
	"maps"
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

func readBack(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSetLimit(t *testing.T) {
	v2 := func(file, content string) map[string]string {
		files := map[string]string{
			FileControllers:    "cpu memory pids\n",
			FileSubtreeControl: "\n",
			FileCPUMax:         "max 100000\n",
			FileMemoryMax:      "max\n",
			FilePIDsMax:        "max\n",
		}
		files[file] = content
		return files
	}
	v1 := func(file, content string) map[string]string {
		files := map[string]string{
			FileCFSQuota:    "-1\n",
			FileCFSPeriod:   "100000\n",
			FileMemoryLimit: "9223372036854771712\n",
			FilePIDsMax:     "max\n",
		}
		files[file] = content
		return files
	}
	tests := []struct {
		name      string
		files     map[string]string
		r         Resource
		m         Method
		want      int64
		wantGot   int64
		wantWrote bool
		// wantFiles are the files' contents afterwards; unlisted files
		// are unchanged.
		wantFiles map[string]string
	}{
		{
			name: "v2_cpu_set", files: v2(FileCPUMax, "max 100000\n"), r: CPU, m: MethodCgroupV2,
			want: 1500, wantGot: 1500, wantWrote: true, wantFiles: map[string]string{FileCPUMax: "150000 100000"},
		},
		{
			name: "v2_cpu_same_is_not_written", files: v2(FileCPUMax, "150000 100000\n"), r: CPU, m: MethodCgroupV2,
			want: 1500, wantGot: 1500,
		},
		{
			name: "v2_cpu_period_drift_restored", files: v2(FileCPUMax, "75000 50000\n"), r: CPU, m: MethodCgroupV2,
			want: 1500, wantGot: 1500, wantWrote: true, wantFiles: map[string]string{FileCPUMax: "150000 100000"},
		},
		{
			name: "v2_cpu_removed", files: v2(FileCPUMax, "150000 100000\n"), r: CPU, m: MethodCgroupV2,
			want: 0, wantGot: 0, wantWrote: true, wantFiles: map[string]string{FileCPUMax: "max"},
		},
		{
			name: "v2_cpu_none_stays_none", files: v2(FileCPUMax, "max 50000\n"), r: CPU, m: MethodCgroupV2,
			want: 0, wantGot: 0,
		},
		{
			name: "v2_memory_set", files: v2(FileMemoryMax, "max\n"), r: Memory, m: MethodCgroupV2,
			want: 64 << 20, wantGot: 64 << 20, wantWrote: true, wantFiles: map[string]string{FileMemoryMax: "67108864"},
		},
		{
			name: "v2_memory_page_rounded_is_the_same_limit", files: v2(FileMemoryMax, "99999744\n"), r: Memory, m: MethodCgroupV2,
			want: 100000000, wantGot: 99999744,
		},
		{
			name: "v2_memory_removed", files: v2(FileMemoryMax, "67108864\n"), r: Memory, m: MethodCgroupV2,
			want: 0, wantGot: 0, wantWrote: true, wantFiles: map[string]string{FileMemoryMax: "max"},
		},
		{
			name: "v2_pids_set", files: v2(FilePIDsMax, "max\n"), r: PIDs, m: MethodCgroupV2,
			want: 10, wantGot: 10, wantWrote: true, wantFiles: map[string]string{FilePIDsMax: "10"},
		},
		{
			name: "v2_pids_changed", files: v2(FilePIDsMax, "50\n"), r: PIDs, m: MethodCgroupV2,
			want: 10, wantGot: 10, wantWrote: true, wantFiles: map[string]string{FilePIDsMax: "10"},
		},
		{
			name: "v2_pids_removed", files: v2(FilePIDsMax, "10\n"), r: PIDs, m: MethodCgroupV2,
			want: 0, wantGot: 0, wantWrote: true, wantFiles: map[string]string{FilePIDsMax: "max"},
		},
		{
			name: "v1_cpu_set", files: v1(FileCFSQuota, "-1\n"), r: CPU, m: MethodCgroupV1,
			want: 500, wantGot: 500, wantWrote: true, wantFiles: map[string]string{FileCFSQuota: "50000"},
		},
		{
			name: "v1_cpu_same_is_not_written", files: v1(FileCFSQuota, "50000\n"), r: CPU, m: MethodCgroupV1,
			want: 500, wantGot: 500,
		},
		{
			name: "v1_cpu_period_drift_restored", files: v1(FileCFSPeriod, "50000\n"), r: CPU, m: MethodCgroupV1,
			want: 500, wantGot: 500, wantWrote: true, wantFiles: map[string]string{FileCFSQuota: "50000", FileCFSPeriod: "100000"},
		},
		{
			name: "v1_cpu_removed", files: v1(FileCFSQuota, "50000\n"), r: CPU, m: MethodCgroupV1,
			want: 0, wantGot: 0, wantWrote: true, wantFiles: map[string]string{FileCFSQuota: "-1"},
		},
		{
			name: "v1_memory_set", files: v1(FileMemoryLimit, "9223372036854771712\n"), r: Memory, m: MethodCgroupV1,
			want: 64 << 20, wantGot: 64 << 20, wantWrote: true, wantFiles: map[string]string{FileMemoryLimit: "67108864"},
		},
		{
			name: "v1_memory_removed", files: v1(FileMemoryLimit, "67108864\n"), r: Memory, m: MethodCgroupV1,
			want: 0, wantGot: 0, wantWrote: true, wantFiles: map[string]string{FileMemoryLimit: "-1"},
		},
		{
			name: "v1_pids_set", files: v1(FilePIDsMax, "max\n"), r: PIDs, m: MethodCgroupV1,
			want: 10, wantGot: 10, wantWrote: true, wantFiles: map[string]string{FilePIDsMax: "10"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := fakeGroup(t, tc.files)
			before := map[string]os.FileInfo{}
			for name := range tc.files {
				fi, err := os.Stat(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				before[name] = fi
			}
			got, wrote, err := SetLimit(dir, tc.r, tc.m, tc.want)
			if err != nil {
				t.Fatalf("SetLimit(%s, %s, %d): %v", tc.r, tc.m, tc.want, err)
			}
			if got != tc.wantGot || wrote != tc.wantWrote {
				t.Errorf("SetLimit(%s, %s, %d) = %d, wrote %v; want %d, wrote %v", tc.r, tc.m, tc.want, got, wrote, tc.wantGot, tc.wantWrote)
			}
			for name, content := range tc.files {
				want, changed := tc.wantFiles[name]
				if !changed {
					want = content
				}
				if got := readBack(t, dir, name); got != want {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
				fi, err := os.Stat(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				if !changed && !fi.ModTime().Equal(before[name].ModTime()) {
					t.Errorf("%s was written although its value was right", name)
				}
			}
		})
	}
}

func TestWriteLimitOnAFreshGroup(t *testing.T) {
	fresh := map[string]string{
		FileCPUMax:      "max 100000\n",
		FileMemoryMax:   "max\n",
		FileCFSQuota:    "-1\n",
		FileCFSPeriod:   "100000\n",
		FileMemoryLimit: "9223372036854771712\n",
		FilePIDsMax:     "max\n",
	}
	tests := []struct {
		name      string
		r         Resource
		m         Method
		want      int64
		period    string // cpu.cfs_period_us before, when not the default
		wantFiles map[string]string
	}{
		{name: "v2_cpu", r: CPU, m: MethodCgroupV2, want: 250, wantFiles: map[string]string{FileCPUMax: "25000 100000"}},
		{name: "v2_memory", r: Memory, m: MethodCgroupV2, want: 64 << 20, wantFiles: map[string]string{FileMemoryMax: "67108864"}},
		{name: "v2_pids", r: PIDs, m: MethodCgroupV2, want: 10, wantFiles: map[string]string{FilePIDsMax: "10"}},
		{name: "v1_cpu", r: CPU, m: MethodCgroupV1, want: 250, wantFiles: map[string]string{FileCFSQuota: "25000"}},
		{name: "v1_cpu_odd_period_restored", r: CPU, m: MethodCgroupV1, want: 250, period: "50000\n", wantFiles: map[string]string{FileCFSQuota: "25000", FileCFSPeriod: "100000"}},
		{name: "v1_memory", r: Memory, m: MethodCgroupV1, want: 64 << 20, wantFiles: map[string]string{FileMemoryLimit: "67108864"}},
		{name: "v1_pids", r: PIDs, m: MethodCgroupV1, want: 10, wantFiles: map[string]string{FilePIDsMax: "10"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			files := maps.Clone(fresh)
			if tc.period != "" {
				files[FileCFSPeriod] = tc.period
			}
			dir := fakeGroup(t, files)
			got, err := WriteLimit(dir, tc.r, tc.m, tc.want)
			if err != nil || got != tc.want {
				t.Fatalf("WriteLimit(%s, %s, %d) = %d, %v; want %d", tc.r, tc.m, tc.want, got, err, tc.want)
			}
			for name, want := range tc.wantFiles {
				if got := readBack(t, dir, name); got != want {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
		})
	}
}

func TestSetLimitErrors(t *testing.T) {
	dir := fakeGroup(t, map[string]string{FilePIDsMax: "max\n"})
	if _, _, err := SetLimit(dir, Memory, MethodCgroupV2, 1<<20); !errors.Is(err, ErrNotFound) {
		t.Errorf("SetLimit without memory.max: error = %v, want ErrNotFound", err)
	}
	if _, _, err := SetLimit(dir, PIDs, MethodCgroupV2, -1); err == nil {
		t.Error("SetLimit(-1): no error")
	}
	if _, _, err := SetLimit(dir, PIDs, MethodAccounting, 10); err == nil {
		t.Error("SetLimit with method accounting: no error")
	}
	if _, err := ReadLimit(filepath.Join(dir, "gone"), PIDs, MethodCgroupV1); !errors.Is(err, ErrNotFound) {
		t.Errorf("ReadLimit of a missing group: error = %v, want ErrNotFound", err)
	}
}

func TestEnableControllers(t *testing.T) {
	tests := []struct {
		name      string
		enabled   string
		ctrls     []string
		wantWrote bool
		wantFile  string
		wantErr   error
	}{
		{name: "adds_only_missing", enabled: "cpu\n", ctrls: []string{"cpu", "memory", "pids"}, wantWrote: true, wantFile: "+memory +pids"},
		{name: "nothing_missing_no_write", enabled: "cpu memory pids\n", ctrls: []string{"memory", "pids"}, wantFile: "cpu memory pids\n"},
		{name: "duplicates_written_once", enabled: "\n", ctrls: []string{"pids", "pids"}, wantWrote: true, wantFile: "+pids"},
		{name: "unavailable_controller", enabled: "\n", ctrls: []string{"io"}, wantFile: "\n", wantErr: ErrUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := fakeGroup(t, map[string]string{FileControllers: "cpu memory pids\n", FileSubtreeControl: tc.enabled})
			wrote, err := EnableControllers(dir, tc.ctrls...)
			if !errors.Is(err, tc.wantErr) || (err != nil) != (tc.wantErr != nil) {
				t.Fatalf("EnableControllers(%v) error = %v, want %v", tc.ctrls, err, tc.wantErr)
			}
			if wrote != tc.wantWrote {
				t.Errorf("EnableControllers(%v) wrote = %v, want %v", tc.ctrls, wrote, tc.wantWrote)
			}
			if got := readBack(t, dir, FileSubtreeControl); got != tc.wantFile {
				t.Errorf("%s = %q, want %q", FileSubtreeControl, got, tc.wantFile)
			}
		})
	}
}

func TestLimitFile(t *testing.T) {
	want := map[Method][]string{
		MethodCgroupV2:   {"cpu.max", "memory.max", "pids.max"},
		MethodCgroupV1:   {"cpu.cfs_quota_us", "memory.limit_in_bytes", "pids.max"},
		MethodAccounting: {"", "", ""},
	}
	for m, files := range want {
		for i, r := range AllResources {
			if got := LimitFile(r, m); got != files[i] {
				t.Errorf("LimitFile(%s, %s) = %q, want %q", r, m, got, files[i])
			}
		}
	}
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
