package applier

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// fileMode is the mode of the files apply writes: manifests are read by
// the daemon and by people, and hold no secrets.
const fileMode = 0o644

// writeAtomic replaces the file at rel inside dir with data, so that a
// reader (the manifest source) sees the old file or the new one, never a
// part: data goes to a temporary dotfile in the same directory, which the
// manifest source ignores, is synced, and is renamed over the file; then
// the directory is synced so the rename survives a crash. A missing
// parent directory inside dir is created.
func writeAtomic(dir, rel string, data []byte) (err error) {
	path := filepath.Join(dir, rel)
	parent := filepath.Dir(path)
	if err := makeDir(parent); err != nil {
		return err
	}
	f, err := os.CreateTemp(parent, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	// CreateTemp makes the file 0600.
	if err := f.Chmod(fileMode); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(parent)
}

// removeFile removes the file at rel inside dir and syncs its directory.
// A file already gone is not an error.
func removeFile(dir, rel string) error {
	path := filepath.Join(dir, rel)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// makeDir creates dir when it is missing and syncs its parent, so the new
// entry is durable before files are renamed into it.
func makeDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		return fmt.Errorf("%s is not a directory", dir)
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return syncDir(filepath.Dir(dir))
}

// syncDir flushes dir's entries to disk.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}
