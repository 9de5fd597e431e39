package admission

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/marshal-dev/marshal/internal/identity"
)

// Procfs is the Inspector of the running kernel.
type Procfs struct {
	// Root is the proc mount; empty means /proc.
	Root string
}

func (p Procfs) root() string {
	if p.Root == "" {
		return "/proc"
	}
	return p.Root
}

// BootID implements Inspector.
func (p Procfs) BootID() (string, error) {
	data, err := os.ReadFile(filepath.Join(p.root(), "sys/kernel/random/boot_id"))
	if err != nil {
		return "", fmt.Errorf("reading boot ID: %w", err)
	}
	id := strings.TrimSpace(string(data))
	if id == "" {
		return "", fmt.Errorf("empty boot ID")
	}
	return id, nil
}

// StartTime implements Inspector.
func (p Procfs) StartTime(pid int) (uint64, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
	}
	st, err := identity.ReadStat(filepath.Join(p.root(), strconv.Itoa(pid), "stat"))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
	}
	if err != nil {
		return 0, fmt.Errorf("reading stat of pid %d: %w", pid, err)
	}
	// A zombie has exited; only its parent's wait keeps the pid.
	if st.State == 'Z' || st.State == 'X' || st.State == 'x' {
		return 0, fmt.Errorf("pid %d has exited: %w", pid, ErrNoProcess)
	}
	return st.StartTime, nil
}

var _ Inspector = Procfs{}
