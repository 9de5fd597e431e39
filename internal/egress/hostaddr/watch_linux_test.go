package hostaddr

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/internal/testutil"
)

// waitFor waits until s.Has(a) is want, failing t after the deadline.
func waitFor(t *testing.T, s *Set, a netip.Addr, want bool) {
	t.Helper()
	deadline := time.After(testutil.Deadline)
	for {
		changed := s.Changed()
		if s.Has(a) == want {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("Has(%s) stayed %v, want %v", a, !want, want)
		}
	}
}

func TestSetFollowsTheInterfaces(t *testing.T) {
	ns := testutil.NewNetNamespace(t)
	s, err := NewAt(ns.Handle)
	if err != nil {
		t.Fatal(err)
	}
	lo := netip.MustParseAddr("127.0.0.1")
	if !s.Has(lo) || !s.Has(netip.MustParseAddr("::1")) {
		t.Fatalf("a new namespace's set lacks loopback: %d addresses", s.Len())
	}
	v4 := netip.MustParsePrefix("198.51.100.7/24")
	v6 := netip.MustParsePrefix("2001:db8::7/64")
	if s.Has(v4.Addr()) {
		t.Fatalf("Has(%s) before it was added", v4.Addr())
	}

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	ns.AddInterface(t, "mt0", v4)
	waitFor(t, s, v4.Addr(), true)
	waitFor(t, s, netip.MustParseAddr("::ffff:198.51.100.7"), true)
	if s.Has(netip.MustParseAddr("198.51.100.8")) {
		t.Error("Has(198.51.100.8): a neighbour on the interface's subnet is not the host's")
	}
	ns.AddInterface(t, "mt1", v6)
	waitFor(t, s, v6.Addr(), true)

	ns.RemoveAddress(t, "mt0", v4)
	waitFor(t, s, v4.Addr(), false)
	if !s.Has(v6.Addr()) || !s.Has(lo) {
		t.Errorf("removing %s removed others too", v4)
	}
}

func TestSetListsAnew(t *testing.T) {
	ns := testutil.NewNetNamespace(t)
	s, err := NewAt(ns.Handle)
	if err != nil {
		t.Fatal(err)
	}
	// Changes made while nothing watched, as after an overflow, are in
	// the next list.
	p := netip.MustParsePrefix("198.51.100.9/32")
	ns.AddInterface(t, "mt0", p)
	if s.Has(p.Addr()) {
		t.Fatal("Has an address added after the list, without watching")
	}
	if err := s.relist(); err != nil {
		t.Fatal(err)
	}
	if !s.Has(p.Addr()) {
		t.Errorf("Has(%s) = false after a list", p.Addr())
	}
}

func TestSetOfThisNamespaceStopsWithItsContext(t *testing.T) {
	s, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if !s.Has(netip.MustParseAddr("127.0.0.1")) {
		t.Errorf("this namespace's set lacks 127.0.0.1: %d addresses", s.Len())
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v, want nil once its context ended", err)
		}
	case <-time.After(testutil.Deadline):
		t.Fatal("Run did not return once its context ended")
	}
}
