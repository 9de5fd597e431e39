package testutil

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/marshal-dev/marshal/internal/cgroup"
)

// CgroupTree is a private cgroup subtree for one test: a uniquely named
// group directly under the cgroup2 mount, mirrored by the same relative
// path in every cgroup v1 hierarchy that a test writes to. Cleanup kills
// whatever runs in it and removes it, in every hierarchy; it never touches
// a group it did not create.
type CgroupTree struct {
	// Mounts is where the hierarchies are mounted.
	Mounts cgroup.Mounts
	// Rel is the subtree's path relative to each mount, such as
	// "/marshal-test-3f9a0c1e".
	Rel string
}

// V2 returns the absolute cgroup2 path of rel inside the tree.
func (c *CgroupTree) V2(rel ...string) string {
	return filepath.Join(append([]string{c.Mounts.V2, c.Rel}, rel...)...)
}

// NewCgroupTree creates a private cgroup2 subtree for t and removes it,
// with everything inside, when t ends. It skips t unless it runs as root
// on a host with a writable cgroup2 mount.
func NewCgroupTree(t testing.TB) *CgroupTree {
	t.Helper()
	RequireRoot(t)
	m, err := cgroup.ReadMounts()
	if err != nil {
		t.Fatal(err)
	}
	if m.V2 == "" {
		t.Skip("needs a cgroup2 mount")
	}
	var b [6]byte
	rand.Read(b[:])
	c := &CgroupTree{Mounts: m, Rel: "/marshal-test-" + hex.EncodeToString(b[:])}
	if err := os.Mkdir(c.V2(), 0o755); err != nil {
		if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
			t.Skipf("needs a writable cgroup2 mount: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Remove(); err != nil {
			t.Errorf("removing cgroup tree: %v", err)
		}
	})
	return c
}

// Roots returns the absolute path of the tree in every hierarchy where it
// exists: cgroup2 first, then v1 mounts in sorted order.
func (c *CgroupTree) Roots() []string {
	roots := []string{c.V2()}
	seen := map[string]bool{}
	var v1 []string
	for _, mnt := range c.Mounts.V1 {
		if seen[mnt] {
			continue
		}
		seen[mnt] = true
		if _, err := os.Stat(filepath.Join(mnt, c.Rel)); err == nil {
			v1 = append(v1, filepath.Join(mnt, c.Rel))
		}
	}
	sort.Strings(v1)
	return append(roots, v1...)
}

// Remove kills every process in the tree and removes the tree from every
// hierarchy. It is safe to call more than once.
func (c *CgroupTree) Remove() error {
	var errs []error
	for _, root := range c.Roots() {
		if err := removeTree(root); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Exists reports whether any part of the tree is left in any hierarchy.
func (c *CgroupTree) Exists() bool {
	if _, err := os.Stat(c.V2()); err == nil {
		return true
	}
	for _, mnt := range c.Mounts.V1 {
		if _, err := os.Stat(filepath.Join(mnt, c.Rel)); err == nil {
			return true
		}
	}
	return false
}

// removeTree kills the processes of root and every group below it, then
// removes the groups deepest first, retrying while the kernel finishes
// tearing the killed processes down.
func removeTree(root string) error {
	if _, err := os.Stat(root); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	deadline := time.Now().Add(Deadline)
	for {
		dirs, err := groupsBelow(root)
		if err != nil {
			return err
		}
		killAll(root, dirs)
		var busy error
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := unix.Rmdir(dirs[i]); err != nil && !errors.Is(err, unix.ENOENT) {
				busy = fmt.Errorf("rmdir %s: %w", dirs[i], err)
			}
		}
		if busy == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return busy
		}
		waitEmpty(root)
	}
}

// groupsBelow lists root and every group below it, parents first.
func groupsBelow(root string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	return dirs, err
}

func killAll(root string, dirs []string) {
	// cgroup v2 kills a whole subtree at once; v1 has no cgroup.kill.
	if os.WriteFile(filepath.Join(root, "cgroup.kill"), []byte("1"), 0) == nil {
		return
	}
	for _, d := range dirs {
		data, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
				unix.Kill(pid, unix.SIGKILL)
			}
		}
	}
}

// waitEmpty blocks until root's cgroup.events changes or a short while
// passes; on v1, which has no events file, it only waits the short while.
func waitEmpty(root string) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err == nil {
		defer unix.Close(fd)
		if _, err := unix.InotifyAddWatch(fd, filepath.Join(root, "cgroup.events"), unix.IN_MODIFY); err == nil {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			unix.Poll(fds, 20)
			return
		}
	}
	time.Sleep(5 * time.Millisecond)
}
