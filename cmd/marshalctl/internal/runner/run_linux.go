package runner

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/marshal-dev/marshal/internal/localapi"
)

// runTerm is what run decided about the terminal.
type runTerm struct {
	// pty: the agent runs on the terminal that is standard input.
	pty bool
	// detach: standard input is a terminal the agent must not have.
	detach bool
}

// runTerminal decides whether the agent runs on a terminal: --pty needs
// standard input to be one, --no-pty detaches from it, and by default the
// agent runs on one when standard input is one.
func runTerminal(o Options) (runTerm, error) {
	_, err := unix.IoctlGetTermios(0, unix.TCGETS)
	onTerminal := err == nil
	switch {
	case o.PTY && !onTerminal:
		return runTerm{}, UsageError("--pty: standard input is not a terminal")
	case o.NoPTY && onTerminal:
		if sid, err := unix.Getsid(0); err == nil && sid == os.Getpid() {
			// Giving up the terminal as its session leader would hang
			// up the whole session.
			return runTerm{}, UsageError("--no-pty: marshalctl leads its session and cannot give up its terminal; run it from a shell, or redirect standard input")
		}
		return runTerm{detach: true}, nil
	case o.NoPTY:
		return runTerm{}, nil
	}
	return runTerm{pty: onTerminal}, nil
}

// execPlan becomes the agent: it gives up the terminal when asked, enters
// the workspace root and execs. It returns only when that fails.
func execPlan(p *localapi.ExecPlan, term runTerm) error {
	if term.detach {
		if err := detachTerminal(); err != nil {
			return err
		}
	}
	if err := os.Chdir(p.Dir); err != nil {
		return err
	}
	env := make([]string, len(p.Env))
	for i, kv := range p.Env {
		env[i] = string(kv)
	}
	return syscall.Exec(p.Path, p.Argv, env)
}

// detachTerminal replaces standard input by /dev/null and gives up the
// controlling terminal, so that the agent can neither read it nor open
// /dev/tty.
func detachTerminal() error {
	null, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer null.Close()
	tty, err := os.Open("/dev/tty")
	if err == nil {
		defer tty.Close()
		// TIOCNOTTY takes no argument; ENOTTY: it is not our controlling
		// terminal after all.
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, tty.Fd(), unix.TIOCNOTTY, 0); errno != 0 && !errors.Is(errno, unix.ENOTTY) {
			return fmt.Errorf("giving up the terminal: %w", errno)
		}
	}
	if err := unix.Dup2(int(null.Fd()), 0); err != nil {
		return fmt.Errorf("replacing standard input: %w", err)
	}
	return nil
}
