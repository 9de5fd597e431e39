package cgroupmount

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name   string
		input  string
		wantV2 string
		wantV1 map[string]string
	}{
		{
			name: "hybrid",
			input: `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime shared:5 - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`,
			wantV2: "/sys/fs/cgroup/unified",
			wantV1: map[string]string{
				"cpu":          "/sys/fs/cgroup/cpu",
				"memory":       "/sys/fs/cgroup/memory",
				"pids":         "/sys/fs/cgroup/pids",
				"name=systemd": "/sys/fs/cgroup/systemd",
			},
		},
		{
			name:   "unified",
			input:  "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n",
			wantV2: "/sys/fs/cgroup",
			wantV1: map[string]string{},
		},
		{
			name: "combined_v1_controllers_and_escaped_space",
			input: `32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
50 23 0:40 / /mnt/my\040cgroup rw - cgroup2 none rw
51 23 0:41 / /second rw - cgroup2 none rw
`,
			wantV2: "/mnt/my cgroup",
			wantV1: map[string]string{"cpu": "/sys/fs/cgroup/cpu,cpuacct", "cpuacct": "/sys/fs/cgroup/cpu,cpuacct"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse(strings.NewReader(tc.input))
			if err != nil {
				t.Fatal(err)
			}
			if m.V2 != tc.wantV2 {
				t.Errorf("V2 = %q, want %q", m.V2, tc.wantV2)
			}
			if len(m.V1) != len(tc.wantV1) {
				t.Errorf("V1 = %v, want %v", m.V1, tc.wantV1)
			}
			for k, v := range tc.wantV1 {
				if m.V1[k] != v {
					t.Errorf("V1[%q] = %q, want %q", k, m.V1[k], v)
				}
			}
		})
	}
}

func TestReadMountsFindsThisHostsCgroup2(t *testing.T) {
	m, err := Read()
	if err != nil {
		t.Fatal(err)
	}
	if m.V2 == "" {
		t.Skip("no cgroup2 mount on this host")
	}
	if !strings.HasPrefix(m.V2, "/") {
		t.Errorf("V2 = %q, want an absolute path", m.V2)
	}
}
