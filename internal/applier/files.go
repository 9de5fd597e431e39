package applier

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// fileMode is the mode of the files apply writes: manifests are read by
// the daemon and by people, and hold no secrets.
const fileMode = 0o644

// Every path apply and delete write, remove or read is resolved beneath
// the config dir by an os.Root opened on it, by the loader's rules: a
// symlink inside the dir is followed while its target stays inside, and
// a path that would leave the dir (a symlink out, "..") is refused with
// ErrOutsideDir. The root resolves each component itself, relative to
// the directory it opened (openat with O_NOFOLLOW), so there is no window
// between a check and the write in which a symlink swapped in could send
// the write elsewhere. Apply and delete only ever name relative paths.

// inConfigDir runs fn with dir opened as a root, and says which path left
// the dir when fn's error is that.
func inConfigDir(dir, rel string, fn func(root *os.Root) error) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	err = fn(root)
	if escapes(err) {
		return fmt.Errorf("%s resolves outside the config dir %s (a symlink leaves it): %w", rel, dir, ErrOutsideDir)
	}
	return err
}

// escapes reports whether err is os.Root's refusal of a path that leaves
// it. The os package has no sentinel for it: its message is the contract.
func escapes(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

// writeAtomic replaces the file at rel inside dir with data, so that a
// reader (the manifest source) sees the old file or the new one, never a
// part: data goes to a temporary dotfile in the same directory, which the
// manifest source ignores, is synced, and is renamed over the file; then
// the directory is synced so the rename survives a crash. A missing
// parent directory inside dir is created.
func writeAtomic(dir, rel string, data []byte) error {
	return inConfigDir(dir, rel, func(root *os.Root) (err error) {
		parent := filepath.Dir(rel)
		if err := makeDir(root, parent); err != nil {
			return err
		}
		f, tmp, err := createTemp(root, parent, "."+filepath.Base(rel)+".*.tmp")
		if err != nil {
			return err
		}
		defer func() {
			if err != nil {
				f.Close()
				root.Remove(tmp)
			}
		}()
		if _, err := f.Write(data); err != nil {
			return err
		}
		if err := f.Chmod(fileMode); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		// The rename replaces whatever entry is at rel, a symlink too,
		// and never follows it.
		if err := root.Rename(tmp, rel); err != nil {
			return err
		}
		return syncDir(root, parent)
	})
}

// createTemp creates a new file in dir inside root, named by pattern with
// its "*" replaced by random digits, mode 0600.
func createTemp(root *os.Root, dir, pattern string) (*os.File, string, error) {
	for range 100 {
		var b [8]byte
		rand.Read(b[:])
		name := filepath.Join(dir, strings.Replace(pattern, "*", hex.EncodeToString(b[:]), 1))
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, name, err
	}
	return nil, "", fmt.Errorf("creating a temporary file in %s: %w", dir, fs.ErrExist)
}

// removeFile removes the file at rel inside dir and syncs its directory.
// A file already gone is not an error. A symlink at rel is removed
// itself, never its target.
func removeFile(dir, rel string) error {
	return inConfigDir(dir, rel, func(root *os.Root) error {
		if err := root.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return syncDir(root, filepath.Dir(rel))
	})
}

// readFile reads the file at rel inside dir, at most limit bytes and one
// more, or returns fs.ErrNotExist. Only a regular file is read, without
// blocking on a FIFO.
func readFile(dir, rel string, limit int64) (data []byte, err error) {
	err = inConfigDir(dir, rel, func(root *os.Root) error {
		f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		if !st.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file", rel)
		}
		data, err = io.ReadAll(io.LimitReader(f, limit+1))
		return err
	})
	return data, err
}

// makeDir creates dir inside root when it is missing and syncs its
// parent, so the new entry is durable before files are renamed into it.
func makeDir(root *os.Root, dir string) error {
	fi, err := root.Stat(dir)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		return fmt.Errorf("%s is not a directory", dir)
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if err := root.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return syncDir(root, filepath.Dir(dir))
}

// syncDir flushes the entries of dir inside root to disk.
func syncDir(root *os.Root, dir string) error {
	d, err := root.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}
