package systemd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// manager is the throwaway user manager every test of the package talks
// to; managerErr says why there is none.
var (
	manager    *testutil.UserManager
	managerErr error
)

func TestMain(m *testing.M) {
	um, err := testutil.StartUserManager()
	if err != nil && !errors.Is(err, testutil.ErrNoUserManager) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	manager, managerErr = um, err
	code := m.Run()
	if um != nil {
		if err := um.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the user manager: %v\n", err)
			code = 1
		}
	}
	if code == 0 {
		// Every connection the tests opened must be closed by now, and
		// with it every goroutine of godbus and go-systemd.
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goroutines left behind: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// requireManager skips t when the package has no user manager.
func requireManager(t testing.TB) *testutil.UserManager {
	t.Helper()
	if manager == nil {
		t.Skip(managerErr)
	}
	return manager
}

// connection is a way the tests reach the manager.
type connection struct {
	name string
	bus  func(m *testutil.UserManager) Bus
}

// connections are both ways: through the bus daemon, and straight to the
// manager's private socket.
var connections = []connection{
	{"bus", func(m *testutil.UserManager) Bus { return Bus{Address: m.BusAddress} }},
	{"private_socket", func(m *testutil.UserManager) Bus { return Bus{Address: "unix:path=" + m.PrivateSocket, Direct: true} }},
}

// newBackend returns a backend on the package's manager through bus,
// closed when t ends.
func newBackend(t testing.TB, bus Bus, opts Options) *Backend {
	t.Helper()
	requireManager(t)
	if opts.Dial == nil {
		opts.Dial = bus.Dial
	}
	b, err := New(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// eventLog collects the events of a Watch.
type eventLog struct {
	wake chan struct{}

	mu     sync.Mutex // guards events
	events []cgroup.Event
}

func (l *eventLog) add(ev cgroup.Event) {
	l.mu.Lock()
	l.events = append(l.events, ev)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// of returns the events about scope name, in order.
func (l *eventLog) of(name string) []cgroup.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []cgroup.Event
	for _, ev := range l.events {
		if ev.Scope.Name == name {
			out = append(out, ev)
		}
	}
	return out
}

// types returns the types of the events about scope name, in order.
func (l *eventLog) types(name string) []cgroup.EventType {
	var out []cgroup.EventType
	for _, ev := range l.of(name) {
		out = append(out, ev.Type)
	}
	return out
}

// waitFor waits until the events about scope name end with want.
func (l *eventLog) waitFor(t testing.TB, name string, want ...cgroup.EventType) {
	t.Helper()
	timer := time.NewTimer(testutil.Deadline)
	defer timer.Stop()
	for {
		got := l.types(name)
		if len(got) >= len(want) && slices.Equal(got[len(got)-len(want):], want) {
			return
		}
		select {
		case <-l.wake:
		case <-timer.C:
			t.Fatalf("timed out after %v waiting for events %v of %s; got %v", testutil.Deadline, want, name, l.types(name))
		}
	}
}

// startWatch runs b.Watch until t ends, and checks that it then returns
// context.Canceled.
func startWatch(t testing.TB, b *Backend) *eventLog {
	t.Helper()
	l := &eventLog{wake: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Watch(ctx, l.add) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Watch() = %v, want %v", err, context.Canceled)
		}
	})
	return l
}

// startChild starts a shell running script, killed when t ends.
func startChild(t testing.TB, script string) *testutil.Child {
	t.Helper()
	return testutil.StartChild(t, exec.Command("/bin/sh", "-c", script))
}
