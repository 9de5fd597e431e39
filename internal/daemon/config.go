package daemon

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/marshal-dev/marshal/internal/admission/pressure"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/localapi"
)

// Modes.
const (
	ModeUser   = "user"
	ModeSystem = "system"
)

// Config is how marshald runs.
type Config struct {
	// Mode is user (the default when not root) or system (root).
	Mode string
	// ConfigDir is the directory of manifests.
	ConfigDir string
	// StateDir holds the state database and the admission journal.
	StateDir string
	// Socket is the local API's unix socket.
	Socket string
	// Backend is auto, systemd or cgroupfs.
	Backend string
	// CgroupRoot is the cgroupfs backend's parent group, relative to the
	// cgroup2 mount.
	CgroupRoot string
	// LogFormat is text or json.
	LogFormat string
	// AllowGID, when not negative, lets members of this group use the
	// socket besides the daemon's own uid and root.
	AllowGID int
	// Relist is the interval of the periodic relist of the config dir and
	// of the drift and readiness checks.
	Relist time.Duration
	// InitJournal creates the admission journal when it is missing. A
	// first start on an empty state dir creates it without being asked;
	// after that, a missing journal means it was lost, and marshald
	// refuses to start unless told to begin a new one.
	InitJournal bool
	// MetricsAddress, when set, also serves /metrics on this loopback TCP
	// address.
	MetricsAddress string
	// DevGuardSocket, when set, is the unix socket on which marshald
	// serves DevGuard's wire protocol to the declared Consumers, mode
	// 0600.
	DevGuardSocket string
	// DevGuardFrameDeadline, when positive, bounds each frame read or
	// written on the DevGuard socket in place of DevGuard's 250 ms; hello
	// states 250 ms whatever it is. Only tests set it (a hidden flag), so
	// that a busy machine's timing never ends their sessions.
	DevGuardFrameDeadline time.Duration
	// Pressure is where admission's pressure level comes from: host (the
	// host's PSI, MemAvailable and the state disk) or off (always
	// normal: the target is the whole work capacity).
	Pressure string
	// Source is where manifests come from: dir (ConfigDir, the default)
	// or kubernetes (an API server, as Kubernetes says).
	Source     string
	Kubernetes KubernetesConfig
	// EgressAddress is the egress proxy's TCP loopback address, or
	// EgressOff; DefaultEgressAddress by default.
	EgressAddress string
	// EgressSocket is the egress proxy's unix socket, or EgressOff; ""
	// puts it beside Socket, as marshal-egress.sock.
	EgressSocket string

	// egressAddressGiven says EgressAddress was asked for, not defaulted:
	// then it must be had.
	egressAddressGiven bool

	// pressureSampler, when set, replaces the host's signals under the
	// host pressure monitor: how tests inject pressure.
	pressureSampler pressure.Sampler
	// backend, when set, is the cgroup backend in place of the one
	// Backend names, on the cgroup2 tree at cgroupMount: how tests run
	// marshald without root, on a fake of the kernel's tree. The caller
	// closes it.
	backend     cgroup.Backend
	cgroupMount string
}

// Pressure sources.
const (
	PressureHost = "host"
	PressureOff  = "off"
)

// DefaultConfig returns the defaults of the mode that euid implies, from
// the XDG directories in the environment in user mode.
func DefaultConfig(euid int, getenv func(string) string) (Config, error) {
	c := Config{Backend: "auto", CgroupRoot: "/marshal", LogFormat: "text", AllowGID: -1, Relist: 60 * time.Second, Pressure: PressureHost,
		EgressAddress: DefaultEgressAddress(euid)}
	c.Mode = ModeUser
	if euid == 0 {
		c.Mode = ModeSystem
	}
	var err error
	if c.ConfigDir, c.StateDir, err = localapi.DefaultDirsFor(euid, getenv); err != nil {
		return c, err
	}
	sock, err := localapi.DefaultSocketFor(euid, getenv)
	if err != nil {
		// Only an error when no --socket is given either; Validate says so.
		sock = ""
	}
	c.Socket = sock
	return c, nil
}

// Validate reports a configuration marshald cannot run with.
func (c Config) Validate() error {
	var errs []error
	if c.ConfigDir == "" {
		errs = append(errs, errors.New("no config dir: pass --config-dir"))
	}
	if c.StateDir == "" {
		errs = append(errs, errors.New("no state dir: pass --state-dir"))
	}
	if c.Socket == "" {
		errs = append(errs, errors.New("no socket: XDG_RUNTIME_DIR is not set; pass --socket"))
	}
	switch c.Backend {
	case "auto", "systemd", "cgroupfs":
	default:
		errs = append(errs, fmt.Errorf("--backend %q: want auto, systemd or cgroupfs", c.Backend))
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		errs = append(errs, fmt.Errorf("--log-format %q: want text or json", c.LogFormat))
	}
	switch c.Pressure {
	case "", PressureHost, PressureOff:
	default:
		errs = append(errs, fmt.Errorf("--pressure %q: want host or off", c.Pressure))
	}
	if err := c.validateSource(); err != nil {
		errs = append(errs, err)
	}
	if c.CgroupRoot == "" || c.CgroupRoot[0] != '/' {
		errs = append(errs, fmt.Errorf("--cgroup-root %q: want a path starting with /", c.CgroupRoot))
	}
	return errors.Join(errs...)
}

// stateFile is the state database inside the state dir.
func (c Config) stateFile() string { return filepath.Join(c.StateDir, "state.db") }

// journalFile is the admission journal inside the state dir.
func (c Config) journalFile() string { return filepath.Join(c.StateDir, "admission.db") }

// absolute makes the directories absolute, so a later chdir or a relative
// path in messages cannot mislead.
func (c *Config) absolute() error {
	if c.EgressSocket == "" {
		c.EgressSocket = defaultEgressSocket(c.Socket)
	}
	for _, p := range []*string{&c.ConfigDir, &c.StateDir, &c.Socket, &c.EgressSocket, &c.DevGuardSocket} {
		if *p == EgressOff || *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = abs
	}
	return nil
}
