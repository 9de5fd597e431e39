package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/marshal-dev/marshal/internal/rawfile"
)

// MoveProcess moves process pid, all its threads, into group dir (v1 or
// v2) by writing cgroup.procs. A process that is gone is an error wrapping
// ErrNoProcess; a missing group one wrapping ErrNotFound.
func MoveProcess(fsys FS, dir string, pid int) error {
	err := fsys.WriteFile(dir, FileProcs, strconv.Itoa(pid))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.ESRCH):
		return fmt.Errorf("moving pid %d into %s: %w", pid, dir, ErrNoProcess)
	}
	return fmt.Errorf("moving pid %d: %w", pid, err)
}

// ReadProcs returns the processes directly in group dir (not below it).
func ReadProcs(dir string) ([]int, error) {
	return readIDs(filepath.Join(dir, FileProcs))
}

func readIDs(path string) ([]int, error) {
	b, err := rawfile.Read(path)
	if err != nil {
		return nil, notFound(err)
	}
	f := strings.Fields(string(b))
	ids := make([]int, 0, len(f))
	for _, s := range f {
		id, err := strconv.Atoi(s)
		if err != nil {
			return nil, fmt.Errorf("parsing %s: %w", path, err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// WalkGroups calls fn for group dir and every group below it, parents
// before children. Groups removed while walking are skipped.
func WalkGroups(dir string, fn func(group string) error) error {
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && path != dir {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		return fn(path)
	})
	return notFound(err)
}

// CountThreads counts the threads in v2 group dir and every group below
// it, from their cgroup.threads: the task count where no pids controller
// keeps one.
func CountThreads(dir string) (int64, error) {
	var n int64
	err := WalkGroups(dir, func(g string) error {
		ids, err := readIDs(filepath.Join(g, FileThreads))
		if errors.Is(err, ErrNotFound) && g != dir {
			return nil
		}
		n += int64(len(ids))
		return err
	})
	return n, err
}

// KillGroup kills every process in v2 group dir and below it by writing
// cgroup.kill, which the kernel applies to the whole subtree at once,
// including processes forked meanwhile. A missing group is an error
// wrapping ErrNotFound; a kernel without cgroup.kill one wrapping
// errors.ErrUnsupported.
func KillGroup(fsys FS, dir string) error {
	err := fsys.WriteFile(dir, FileKill, "1")
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(dir); serr != nil {
			return fmt.Errorf("killing %s: %w", dir, notFound(serr))
		}
		return fmt.Errorf("killing %s: no %s: %w", dir, FileKill, errors.ErrUnsupported)
	}
	if err != nil {
		return fmt.Errorf("killing %s: %w", dir, err)
	}
	return nil
}

// FreezeGroup freezes (or thaws) v2 group dir and everything below it by
// writing cgroup.freeze. The freeze completes asynchronously: cgroup.events
// says "frozen 1" once every task is stopped. A kernel without
// cgroup.freeze is an error wrapping errors.ErrUnsupported.
func FreezeGroup(fsys FS, dir string, frozen bool) error {
	v := "0"
	if frozen {
		v = "1"
	}
	err := fsys.WriteFile(dir, FileFreeze, v)
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(dir); serr != nil {
			return fmt.Errorf("freezing %s: %w", dir, notFound(serr))
		}
		return fmt.Errorf("freezing %s: no %s: %w", dir, FileFreeze, errors.ErrUnsupported)
	}
	if err != nil {
		return fmt.Errorf("freezing %s: %w", dir, err)
	}
	return nil
}

// RemoveGroup removes the empty group dir (rmdir). A group that still holds
// processes or child groups is an error wrapping ErrBusy; a missing group
// is not an error.
func RemoveGroup(fsys FS, dir string) error {
	err := fsys.Rmdir(dir)
	switch {
	case err == nil, errors.Is(err, fs.ErrNotExist):
		return nil
	case errors.Is(err, syscall.EBUSY), errors.Is(err, syscall.ENOTEMPTY):
		return fmt.Errorf("removing %s: %w", dir, ErrBusy)
	}
	return fmt.Errorf("removing %s: %w", dir, err)
}

// removeDir is rmdir(2) of dir.
func removeDir(dir string) error {
	if err := syscall.Rmdir(dir); err != nil {
		return &fs.PathError{Op: "rmdir", Path: dir, Err: err}
	}
	return nil
}
