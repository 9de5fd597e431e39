package cgroupmount

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Mounts is where the cgroup hierarchies are mounted on this host.
type Mounts struct {
	// V2 is the cgroup2 mount point: /sys/fs/cgroup on a unified host,
	// /sys/fs/cgroup/unified on a hybrid one. Empty when not mounted.
	V2 string
	// V1 maps each cgroup v1 controller (and "name=systemd") to its mount
	// point. Empty on a unified host.
	V1 map[string]string
}

// Read finds the cgroup mounts in /proc/self/mountinfo.
func Read() (Mounts, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return Mounts{}, fmt.Errorf("finding cgroup mounts: %w", err)
	}
	defer f.Close()
	return Parse(f)
}

// Parse reads mounts in the format of /proc/self/mountinfo. When
// a hierarchy is mounted more than once, the first mount wins.
func Parse(r io.Reader) (Mounts, error) {
	m := Mounts{V1: map[string]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		// 41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" && i >= 6 {
				sep = i
				break
			}
		}
		if sep < 0 || len(fields) < sep+4 {
			continue
		}
		point, fstype, opts := unescapeMount(fields[4]), fields[sep+1], fields[sep+3]
		switch fstype {
		case "cgroup2":
			if m.V2 == "" {
				m.V2 = point
			}
		case "cgroup":
			for _, o := range strings.Split(opts, ",") {
				if o == "rw" || o == "ro" || strings.HasPrefix(o, "release_agent=") || o == "clone_children" || o == "noprefix" || o == "xattr" || o == "cpuset_v2_mode" {
					continue
				}
				if _, seen := m.V1[o]; !seen {
					m.V1[o] = point
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return Mounts{}, fmt.Errorf("reading mountinfo: %w", err)
	}
	return m, nil
}

// unescapeMount undoes the octal escapes (\040 for space) of mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
