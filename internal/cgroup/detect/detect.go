package detect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/cgroup/cgroupfs"
	"github.com/marshal-dev/marshal/internal/cgroup/systemd"
)

// Backend names, as the --backend flag takes them.
const (
	Auto     = "auto"
	Systemd  = "systemd"
	Cgroupfs = "cgroupfs"
)

// Options say which backend to open and how.
type Options struct {
	// Backend is Auto (also when empty), Systemd or Cgroupfs.
	Backend string
	// CgroupRoot is the cgroupfs backend's parent group, relative to the
	// cgroup2 mount; empty means cgroupfs.DefaultRoot.
	CgroupRoot string
	// User selects the calling user's systemd manager instead of the
	// system's.
	User bool
	// Mounts is where the cgroup hierarchies are mounted; the zero value
	// means cgroup.ReadMounts().
	Mounts cgroup.Mounts
}

// Open returns the backend opts asks for. Auto picks systemd when a
// manager bus is found and the manager answers on it (see
// systemd.FindBus: for a user, $DBUS_SESSION_BUS_ADDRESS or
// $XDG_RUNTIME_DIR/systemd/private or $XDG_RUNTIME_DIR/bus; for the
// system, /run/systemd/private or the system bus), else cgroupfs when the
// cgroup2 mount is writable where its tree goes; when neither works it
// returns an error wrapping cgroup.ErrUnavailable that says what each
// lacked. A backend named explicitly is opened or fails on its own, with
// no fallback. Any other failure, and ctx ending, is returned as is.
//
// The backend may hold connections; release it with Close.
func Open(ctx context.Context, opts Options) (cgroup.Backend, error) {
	sdOpts := systemd.Options{User: opts.User, Mounts: opts.Mounts}
	fsOpts := cgroupfs.Options{Root: opts.CgroupRoot, Mounts: opts.Mounts}
	switch opts.Backend {
	case Systemd:
		sd, err := systemd.New(ctx, sdOpts)
		if err != nil {
			return nil, err // not a typed nil in the interface
		}
		return sd, nil
	case Cgroupfs:
		fs, err := cgroupfs.New(fsOpts)
		if err != nil {
			return nil, err
		}
		return fs, nil
	case Auto, "":
	default:
		return nil, fmt.Errorf("%w %q: want %s, %s or %s", ErrUnknownBackend, opts.Backend, Auto, Systemd, Cgroupfs)
	}

	sd, sdErr := systemd.New(ctx, sdOpts)
	if sdErr == nil {
		return sd, nil
	}
	if ctx.Err() != nil || !errors.Is(sdErr, cgroup.ErrUnavailable) {
		return nil, sdErr
	}
	fs, fsErr := cgroupfs.New(fsOpts)
	if fsErr == nil {
		return fs, nil
	}
	if !errors.Is(fsErr, cgroup.ErrUnavailable) {
		return nil, fsErr
	}
	return nil, &NoBackendError{User: opts.User, SystemdBooted: systemdBooted(), Systemd: sdErr, Cgroupfs: fsErr}
}

// NoBackendError is Open's error when neither backend works here. Its
// message leads with the one thing to do in this situation, then says
// what each backend lacked, a line each.
type NoBackendError struct {
	// User is set for a user's marshald, which needs a user manager.
	User bool
	// SystemdBooted is set where PID 1 is systemd.
	SystemdBooted bool
	// Systemd and Cgroupfs are why each backend could not be opened.
	Systemd, Cgroupfs error
}

func (e *NoBackendError) Error() string {
	var todo string
	switch {
	case e.User && !e.SystemdBooted:
		todo = "PID 1 is not systemd, so there is no user manager to run agents under: run marshald as root " +
			"(marshald --allow-group GROUP lets a group's members use it)"
	case e.User:
		todo = "start your systemd user manager (log in through a session, or loginctl enable-linger $USER), " +
			"or run marshald as root"
	default:
		todo = "marshald as root writes the cgroup2 tree itself: mount cgroup2 read-write, " +
			"or name a group it may write with --cgroup-root"
	}
	// Each cause names its backend.
	return fmt.Sprintf("no cgroup backend works here: %s; marshalctl doctor checks the host\n  %s\n  %s",
		todo, cause(e.Systemd), cause(e.Cgroupfs))
}

// Unwrap returns both causes, for errors.Is (cgroup.ErrUnavailable).
func (e *NoBackendError) Unwrap() []error { return []error{e.Systemd, e.Cgroupfs} }

// cause is err's message without the sentinel every backend's
// unavailability ends with.
func cause(err error) string {
	return strings.TrimSuffix(err.Error(), ": "+cgroup.ErrUnavailable.Error())
}

// systemdBooted reports whether PID 1 is systemd, as sd_booted(3) tells.
func systemdBooted() bool {
	fi, err := os.Stat("/run/systemd/system")
	return err == nil && fi.IsDir()
}

// Close releases what backend b holds (the systemd backend's connections
// to its manager); it does nothing for a backend that holds nothing.
func Close(b cgroup.Backend) error {
	if c, ok := b.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
