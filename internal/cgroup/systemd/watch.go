package systemd

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/godbus/dbus/v5"

	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/scope"
)

// signalBuffer is how many signals may wait for the watch loop. godbus
// hands a signal that finds the channel full to a goroutine of its own,
// which loses their order; the watcher re-reads the kernel's state on
// each signal, so order matters little, but a deep buffer keeps it.
const signalBuffer = 1024

// Watch reports what happens to marshal scopes by calling fn, until ctx
// ends; it then returns ctx.Err() once no further call to fn can happen.
// It returns an error wrapping ErrDisconnected when its connection to the
// manager closes first.
//
// It is driven by the manager's signals on a connection of its own, never
// by a timer: after Subscribe, PropertiesChanged of a scope unit's
// ActiveState and UnitRemoved. Each signal is a hint; on it Watch reads
// the scope's cgroup.events (cgroup2), the kernel's word on whether the
// scope holds processes, falling back to the unit state where there is no
// cgroup2. It starts with a relist (after subscribing, so nothing falls
// between) that reports every running scope with Resync set.
//
// For each scope, events come in the order ScopeCreated, ScopePopulated,
// ScopeEmptied, ScopeRemoved (populated and emptied possibly repeated): a
// scope is reported created once the manager says it runs, and emptied
// before removed when it was last seen populated. A scope that starts and
// ends between two signals the manager coalesced is reported created,
// empty, and removed when the manager says it stopped; the unit stubs
// systemd loads when a client asks after a unit that does not exist never
// run, and are not reported.
func (b *Backend) Watch(ctx context.Context, fn func(cgroup.Event)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	conn, err := b.dial(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("systemd: watch: %w", err)
	}
	// Closing the connection ends the subscription and godbus's
	// goroutines for it.
	defer conn.Close()
	signals := make(chan *dbus.Signal, signalBuffer)
	conn.Signal(signals)
	if err := subscribe(ctx, conn); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("systemd: watch: %w", err)
	}

	w := &watcher{b: b, fn: fn, known: map[string]*cgroup.Scope{}}
	scopes, err := b.ListScopes(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("systemd: watch: relisting: %w", err)
	}
	for _, s := range scopes {
		w.relisted(s)
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case sig, ok := <-signals:
			if !ok {
				return fmt.Errorf("systemd: watch: %w", ErrDisconnected)
			}
			w.handle(ctx, sig)
		}
	}
}

// subscribe makes the manager send unit signals to conn. Through a bus
// daemon that takes match rules for the signals and the manager's
// Subscribe; on the private socket the manager sends every signal to
// every peer anyway, and a peer has no daemon to take match rules.
func subscribe(ctx context.Context, conn *dbus.Conn) error {
	if names := conn.Names(); len(names) > 0 && names[0] != "" {
		rules := [][]dbus.MatchOption{
			{
				dbus.WithMatchSender(managerName),
				dbus.WithMatchInterface(managerIface),
				dbus.WithMatchMember("UnitRemoved"),
			},
			{
				dbus.WithMatchSender(managerName),
				dbus.WithMatchInterface(propsIface),
				dbus.WithMatchMember("PropertiesChanged"),
				dbus.WithMatchPathNamespace(unitPathNS),
				dbus.WithMatchArg(0, unitIface),
			},
		}
		for _, rule := range rules {
			if err := conn.AddMatchSignalContext(ctx, rule...); err != nil {
				return fmt.Errorf("adding a match rule: %w", err)
			}
		}
	}
	if err := conn.Object(managerName, managerPath).CallWithContext(ctx, managerIface+".Subscribe", 0).Store(); err != nil {
		return fmt.Errorf("subscribing to the manager: %w", err)
	}
	return nil
}

// watcher turns the manager's signals into scope events. It is used by
// one goroutine, Watch's.
type watcher struct {
	b  *Backend
	fn func(cgroup.Event)
	// known holds the scopes reported created and not yet removed, as
	// last reported.
	known map[string]*cgroup.Scope
}

// relisted reports a scope found by the relist that starts Watch.
func (w *watcher) relisted(s cgroup.Scope) {
	if _, ok := w.known[s.Name]; ok {
		return
	}
	w.known[s.Name] = &s
	w.fn(cgroup.Event{Type: cgroup.ScopeCreated, Scope: s, Resync: true})
	if s.Populated {
		w.fn(cgroup.Event{Type: cgroup.ScopePopulated, Scope: s, Resync: true})
	}
}

func (w *watcher) handle(ctx context.Context, sig *dbus.Signal) {
	switch sig.Name {
	case managerIface + ".UnitRemoved":
		if len(sig.Body) > 0 {
			if name, ok := sig.Body[0].(string); ok {
				w.removed(name)
			}
		}
	case propsIface + ".PropertiesChanged":
		if len(sig.Body) < 2 {
			return
		}
		if iface, _ := sig.Body[0].(string); iface != unitIface {
			return
		}
		changed, _ := sig.Body[1].(map[string]dbus.Variant)
		state, ok := changed["ActiveState"].Value().(string)
		if !ok {
			return
		}
		id, ok := scope.ParseScopeName(unitNameFromPath(sig.Path))
		if !ok {
			return
		}
		w.changed(ctx, id, state)
	}
}

// changed handles a new ActiveState of scope id.
func (w *watcher) changed(ctx context.Context, id scope.Identity, state string) {
	running := activeState(state)
	s, seen := w.known[id.Scope]
	if !seen {
		if !running {
			w.endedUnseen(id)
			return
		}
		// The unit is loaded now, so asking for its cgroup loads nothing.
		rel, err := w.b.controlGroup(ctx, id.Scope, scopeIface)
		if errors.Is(err, cgroup.ErrNotFound) {
			return
		}
		if err != nil {
			rel = w.b.scopeRel(id)
		}
		s = &cgroup.Scope{Name: id.Scope, Profile: id.Profile, ID: id.ID, Path: rel}
	}
	pop, exists := w.b.scopeState(s.Path, running)
	if !seen {
		if !exists {
			return
		}
		s.Populated = pop
		w.known[id.Scope] = s
		w.fn(cgroup.Event{Type: cgroup.ScopeCreated, Scope: *s})
		if pop {
			w.fn(cgroup.Event{Type: cgroup.ScopePopulated, Scope: *s})
		}
		return
	}
	if pop == s.Populated {
		return
	}
	s.Populated = pop
	if pop {
		w.fn(cgroup.Event{Type: cgroup.ScopePopulated, Scope: *s})
	} else {
		w.fn(cgroup.Event{Type: cgroup.ScopeEmptied, Scope: *s})
	}
}

// endedUnseen reports a scope the manager says stopped before the watch
// saw it run (it started and ended between two signals the manager
// coalesced): created, empty, and removed at once, when its group is gone
// or empty, so that what waits on its end (a launch's settling) hears
// of it. A unit stub, which never runs, gets no change of ActiveState.
func (w *watcher) endedUnseen(id scope.Identity) {
	s := cgroup.Scope{Name: id.Scope, Profile: id.Profile, ID: id.ID, Path: w.b.scopeRel(id)}
	if pop, _ := w.b.scopeState(s.Path, false); pop {
		return
	}
	w.fn(cgroup.Event{Type: cgroup.ScopeCreated, Scope: s})
	w.fn(cgroup.Event{Type: cgroup.ScopeRemoved, Scope: s})
}

// removed handles the unloading of unit name.
func (w *watcher) removed(name string) {
	s, ok := w.known[name]
	if !ok {
		return
	}
	delete(w.known, name)
	if s.Populated {
		s.Populated = false
		w.fn(cgroup.Event{Type: cgroup.ScopeEmptied, Scope: *s})
	}
	w.fn(cgroup.Event{Type: cgroup.ScopeRemoved, Scope: *s})
}

// scopeState says whether the group at rel holds processes and whether it
// exists, from cgroup2's cgroup.events. Without cgroup2, or when the file
// cannot be read, it goes by the unit state: running means populated.
func (b *Backend) scopeState(rel string, running bool) (populated, exists bool) {
	pop, known, err := b.populated(rel)
	switch {
	case !known:
		return running, true
	case errors.Is(err, cgroup.ErrNotFound):
		return false, false
	case err != nil:
		return running, true
	}
	return pop, true
}

// unitNameFromPath returns the unit name of a unit's object path,
// undoing the bus escaping (each byte outside [A-Za-z0-9] as _xx).
func unitNameFromPath(p dbus.ObjectPath) string {
	esc, ok := strings.CutPrefix(string(p), string(unitPathNS)+"/")
	if !ok {
		return ""
	}
	var b strings.Builder
	for i := 0; i < len(esc); i++ {
		if esc[i] == '_' && i+2 < len(esc) {
			if v, err := hex.DecodeString(esc[i+1 : i+3]); err == nil {
				b.Write(v)
				i += 2
				continue
			}
		}
		b.WriteByte(esc[i])
	}
	return b.String()
}
