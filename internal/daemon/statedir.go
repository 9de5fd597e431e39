package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// stateDirMode is the state dir's mode: it holds the admission journal
// and the last good manifests, which are marshald's alone.
const stateDirMode = 0o700

// prepareStateDir creates the state dir, or makes one it was given
// private: a directory of marshald's own uid open to others is made
// 0700, as systemd's StateDirectoryMode= would, since nothing but
// marshald has reason to look inside. A directory of another uid, or one
// shared through the sticky bit (such as /tmp), is refused: changing its
// mode would take it from others.
func prepareStateDir(dir string, log func(msg string, args ...any)) error {
	if err := os.MkdirAll(dir, stateDirMode); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("state dir %s is not a directory", dir)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return errors.New("state dir: no owner information on this system")
	}
	mode := st.Mode()
	switch {
	case int(sys.Uid) != os.Geteuid():
		return fmt.Errorf("state dir %s belongs to uid %d, not marshald's uid %d: give marshald a state dir of its own (--state-dir)", dir, sys.Uid, os.Geteuid())
	case mode&fs.ModeSticky != 0:
		return fmt.Errorf("state dir %s is shared (mode %04o, sticky): give marshald a state dir of its own (--state-dir)", dir, mode.Perm()|01000)
	case mode.Perm() == stateDirMode:
		return nil
	}
	if err := os.Chmod(dir, stateDirMode); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	log("made the state dir private", "dir", dir, "was", fmt.Sprintf("%04o", mode.Perm()), "now", fmt.Sprintf("%04o", stateDirMode))
	return nil
}
