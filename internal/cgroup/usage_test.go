package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// ReadUsage reads each quantity wherever the host keeps it: cgroup2
// first, then the v1 hierarchy of its controller, then (for tasks) a
// count of the cgroup2 threads.
func TestReadUsage(t *testing.T) {
	const rel = "/marshal.slice/marshal-coder.slice/marshal-coder-0123456789abcdef0123456789abcdef.scope"
	tests := []struct {
		name string
		// files maps a hierarchy ("unified", or a v1 controller) to the
		// group's files there, a file below the group named with its
		// subgroup ("child/cgroup.threads").
		files  map[string]map[string]string
		noV2   bool
		want   Usage
		wantNF bool
	}{
		{
			name: "unified",
			files: map[string]map[string]string{"unified": {
				FileCPUStat: "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n", FileMemoryCurrent: "4096\n",
				FilePIDsCurrent: "3\n", FileMemoryEvents: "low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\noom_group_kill 0\n",
				FileThreads: "10\n11\n",
			}},
			want: Usage{CPU: 1500 * time.Microsecond, MemoryBytes: 4096, Tasks: 3, OOMKills: 1},
		},
		{
			name: "hybrid_with_v1_controllers",
			files: map[string]map[string]string{
				"unified": {FileCPUStat: "usage_usec 20\n", FileThreads: "10\n11\n"},
				"memory":  {FileMemoryUsage: "8192\n", FileMemoryOOMCtl: "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"},
				"pids":    {FilePIDsCurrent: "5\n"},
			},
			want: Usage{CPU: 20 * time.Microsecond, MemoryBytes: 8192, Tasks: 5, OOMKills: 2},
		},
		{
			name: "hybrid_without_controllers_counts_threads",
			files: map[string]map[string]string{
				"unified": {FileCPUStat: "usage_usec 20\n", FileThreads: "10\n11\n", "child/" + FileThreads: "12\n"},
			},
			want: Usage{CPU: 20 * time.Microsecond, Tasks: 3},
		},
		{
			name:  "v1_only",
			noV2:  true,
			files: map[string]map[string]string{"cpuacct": {FileCPUAcctUsage: "2000000\n"}, "pids": {FilePIDsCurrent: "1\n"}},
			want:  Usage{CPU: 2 * time.Millisecond, Tasks: 1},
		},
		{
			name:   "missing_group",
			files:  map[string]map[string]string{"memory": {FileMemoryUsage: "8192\n"}},
			wantNF: true,
		},
		{
			name:   "v1_only_missing_group",
			noV2:   true,
			files:  map[string]map[string]string{"pids": {FilePIDsCurrent: "1\n"}},
			wantNF: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			m := Mounts{V2: filepath.Join(root, "unified"), V1: map[string]string{}}
			if tc.noV2 {
				m.V2 = ""
			}
			for _, ctrl := range []string{"cpuacct", "memory", "pids"} {
				m.V1[ctrl] = filepath.Join(root, ctrl)
			}
			for h, files := range tc.files {
				for name, content := range files {
					path := filepath.Join(root, h, rel, name)
					if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			got, err := ReadUsage(m, rel)
			if tc.wantNF {
				if !errors.Is(err, ErrNotFound) {
					t.Fatalf("ReadUsage = %+v, %v; want ErrNotFound", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("ReadUsage = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}
