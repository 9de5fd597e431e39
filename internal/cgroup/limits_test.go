package cgroup

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"testing"
)

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
			got, wrote, err := SetLimit(Host, dir, tc.r, tc.m, tc.want)
			if err != nil {
				t.Fatalf("SetLimit(Host, %s, %s, %d): %v", tc.r, tc.m, tc.want, err)
			}
			if got != tc.wantGot || wrote != tc.wantWrote {
				t.Errorf("SetLimit(Host, %s, %s, %d) = %d, wrote %v; want %d, wrote %v", tc.r, tc.m, tc.want, got, wrote, tc.wantGot, tc.wantWrote)
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
			got, err := WriteLimit(Host, dir, tc.r, tc.m, tc.want)
			if err != nil || got != tc.want {
				t.Fatalf("WriteLimit(Host, %s, %s, %d) = %d, %v; want %d", tc.r, tc.m, tc.want, got, err, tc.want)
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
	if _, _, err := SetLimit(Host, dir, Memory, MethodCgroupV2, 1<<20); !errors.Is(err, ErrNotFound) {
		t.Errorf("SetLimit without memory.max: error = %v, want ErrNotFound", err)
	}
	if _, _, err := SetLimit(Host, dir, PIDs, MethodCgroupV2, -1); err == nil {
		t.Error("SetLimit(Host, -1): no error")
	}
	if _, _, err := SetLimit(Host, dir, PIDs, MethodAccounting, 10); err == nil {
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
			wrote, err := EnableControllers(Host, dir, tc.ctrls...)
			if !errors.Is(err, tc.wantErr) || (err != nil) != (tc.wantErr != nil) {
				t.Fatalf("EnableControllers(Host, %v) error = %v, want %v", tc.ctrls, err, tc.wantErr)
			}
			if wrote != tc.wantWrote {
				t.Errorf("EnableControllers(Host, %v) wrote = %v, want %v", tc.ctrls, wrote, tc.wantWrote)
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
