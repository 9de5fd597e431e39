package systemd

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/godbus/dbus/v5"
)

// Where the system manager listens.
const (
	// systemPrivateSocket is the system manager's own socket, served
	// without a bus daemon; only root may use it.
	systemPrivateSocket = "/run/systemd/private"
	// systemBusSocket is the system bus daemon's socket.
	systemBusSocket = "/run/dbus/system_bus_socket"
)

// Bus says how to reach a systemd manager.
type Bus struct {
	// Address is a D-Bus address, such as "unix:path=/run/user/1000/bus".
	Address string
	// Direct is true for the manager's private socket: a peer-to-peer
	// connection, with no bus daemon in between (no Hello, no match
	// rules; the manager sends every signal to such a peer).
	Direct bool
}

// FindBus returns how to reach the calling user's manager (user true) or
// the system's. It looks, in order:
//
//   - user: $DBUS_SESSION_BUS_ADDRESS, then the manager's private socket
//     $XDG_RUNTIME_DIR/systemd/private, then the bus socket
//     $XDG_RUNTIME_DIR/bus (godbus does not look there by itself);
//   - system: /run/systemd/private when running as root, then
//     $DBUS_SYSTEM_BUS_ADDRESS, then /run/dbus/system_bus_socket.
//
// It only looks; whether a manager answers there is for Dial to find out.
// When nothing is present it returns an error wrapping ErrNoBus that
// names every place it looked.
func FindBus(user bool) (Bus, error) {
	if user {
		return findUserBus()
	}
	return findSystemBus()
}

func findUserBus() (Bus, error) {
	if addr := os.Getenv("DBUS_SESSION_BUS_ADDRESS"); addr != "" {
		return Bus{Address: addr}, nil
	}
	dir := os.Getenv("XDG_RUNTIME_DIR")
	if dir == "" {
		return Bus{}, fmt.Errorf("user manager: DBUS_SESSION_BUS_ADDRESS and XDG_RUNTIME_DIR are unset: %w", ErrNoBus)
	}
	private := filepath.Join(dir, "systemd", "private")
	if isSocket(private) {
		return Bus{Address: "unix:path=" + private, Direct: true}, nil
	}
	bus := filepath.Join(dir, "bus")
	if isSocket(bus) {
		return Bus{Address: "unix:path=" + bus}, nil
	}
	return Bus{}, fmt.Errorf("user manager: DBUS_SESSION_BUS_ADDRESS is unset and there is no socket at %s or %s: %w", private, bus, ErrNoBus)
}

func findSystemBus() (Bus, error) {
	var missing []string
	if os.Geteuid() == 0 {
		if isSocket(systemPrivateSocket) {
			return Bus{Address: "unix:path=" + systemPrivateSocket, Direct: true}, nil
		}
		missing = append(missing, "no socket at "+systemPrivateSocket)
	} else {
		missing = append(missing, systemPrivateSocket+" needs root")
	}
	if addr := os.Getenv("DBUS_SYSTEM_BUS_ADDRESS"); addr != "" {
		return Bus{Address: addr}, nil
	}
	if isSocket(systemBusSocket) {
		return Bus{Address: "unix:path=" + systemBusSocket}, nil
	}
	missing = append(missing, "DBUS_SYSTEM_BUS_ADDRESS is unset", "no socket at "+systemBusSocket)
	return Bus{}, fmt.Errorf("system manager: %s: %w", strings.Join(missing, "; "), ErrNoBus)
}

func isSocket(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().Type() == fs.ModeSocket
}

// Dial connects to the bus and authenticates as the calling uid; on a bus
// daemon it also says Hello, on the manager's private socket it makes a
// first call to the manager. ctx bounds only the dialing: the connection
// lives until the caller closes it.
func (b Bus) Dial(ctx context.Context) (*dbus.Conn, error) {
	conn, err := dbus.Dial(b.Address)
	if err != nil {
		return nil, fmt.Errorf("dialing %s: %w", b.Address, err)
	}
	// Closing the connection unblocks the handshake when ctx ends.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	err = b.handshake(ctx, conn)
	if !stop() {
		conn.Close()
		return nil, fmt.Errorf("dialing %s: %w", b.Address, context.Cause(ctx))
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("dialing %s: %w", b.Address, err)
	}
	return conn, nil
}

func (b Bus) handshake(ctx context.Context, conn *dbus.Conn) error {
	if err := conn.Auth([]dbus.Auth{dbus.AuthExternal(strconv.Itoa(os.Getuid()))}); err != nil {
		return fmt.Errorf("authenticating: %w", err)
	}
	if !b.Direct {
		if err := conn.Hello(); err != nil {
			return fmt.Errorf("hello: %w", err)
		}
		return nil
	}
	// On its private socket the manager leaves a first message addressed
	// to a bus daemon unanswered (go-systemd sends one, AddMatch, and
	// would wait forever); once the manager has answered a call of its
	// own, such messages get their error reply.
	var v dbus.Variant
	err := conn.Object(managerName, managerPath).CallWithContext(ctx, "org.freedesktop.DBus.Properties.Get", 0, managerIface, "Version").Store(&v)
	if err != nil {
		return fmt.Errorf("asking the manager for its version: %w", err)
	}
	return nil
}
