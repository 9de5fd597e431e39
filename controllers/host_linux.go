package controllers

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/marshal-dev/marshal/api/v1alpha1"
)

// measureHost measures what this machine has: the CPUs this process may
// run on (runtime.NumCPU) in thousandths, MemTotal, and the tasks the
// kernel can hold (the lower of pid_max and threads-max).
func measureHost() (v1alpha1.Amounts, error) {
	a := v1alpha1.Amounts{CPUMilli: int64(runtime.NumCPU()) * 1000}
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return v1alpha1.Amounts{}, fmt.Errorf("reading memory size: %w", err)
	}
	if a.MemoryBytes, err = memTotal(data); err != nil {
		return v1alpha1.Amounts{}, err
	}
	for _, f := range []string{"/proc/sys/kernel/pid_max", "/proc/sys/kernel/threads-max"} {
		data, err := os.ReadFile(f)
		if err != nil {
			return v1alpha1.Amounts{}, fmt.Errorf("reading task limit: %w", err)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		if err != nil || n <= 0 {
			return v1alpha1.Amounts{}, fmt.Errorf("%s: %q is not a count", f, bytes.TrimSpace(data))
		}
		if a.Tasks == 0 || n < a.Tasks {
			a.Tasks = n
		}
	}
	return a, nil
}

// memTotal returns MemTotal, in bytes, from the content of /proc/meminfo.
func memTotal(meminfo []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(meminfo))
	for sc.Scan() {
		// MemTotal:        4017456 kB
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			break
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb <= 0 {
			break
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("/proc/meminfo has no MemTotal in kB")
}
