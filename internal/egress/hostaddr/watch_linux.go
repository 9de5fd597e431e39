package hostaddr

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// resubscribeDelay is the pause before subscribing again when the last
// subscription stopped sooner than that: a failing socket is not retried
// in a loop.
const resubscribeDelay = time.Second

// receiveBuffer is the notification socket's buffer: room for a burst of
// changes (a VPN coming up) before the kernel drops some, after which the
// set is listed again anyway.
const receiveBuffer = 1 << 20

// watcher is where a Set's addresses are read.
type watcher struct {
	ns netns.NsHandle
}

// New lists the addresses of this process's network namespace; Run keeps
// them current.
func New() (*Set, error) { return NewAt(netns.None()) }

// NewAt lists the addresses of the network namespace ns refers to, which
// must stay open while the set is used; Run keeps them current.
func NewAt(ns netns.NsHandle) (*Set, error) {
	s := newSet()
	s.ns = ns
	if err := s.relist(); err != nil {
		return nil, err
	}
	return s, nil
}

// Run keeps the set current until ctx ends, then returns nil once the
// subscription's goroutines have stopped. When notifications stop (the
// socket's buffer overflowed and the kernel dropped some, or the
// subscription failed), it subscribes again and lists the addresses anew,
// at once unless the last subscription lasted less than resubscribeDelay.
// It returns an error when listing fails.
func (s *Set) Run(ctx context.Context) error {
	for {
		start := time.Now()
		err := s.watch(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, errList):
			return err
		case time.Since(start) >= resubscribeDelay:
			continue
		}
		t := time.NewTimer(resubscribeDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

var (
	errList    = errors.New("listing addresses")
	errStopped = errors.New("address notifications stopped")
)

// watch subscribes, lists, and applies notifications until ctx ends or
// the subscription stops.
func (s *Set) watch(ctx context.Context) error {
	ch := make(chan netlink.AddrUpdate, 64)
	done := make(chan struct{})
	ns := s.ns
	err := netlink.AddrSubscribeWithOptions(ch, done, netlink.AddrSubscribeOptions{
		Namespace: &ns, ReceiveBufferSize: receiveBuffer,
	})
	if err != nil {
		close(done)
		return fmt.Errorf("subscribing to address notifications: %w", err)
	}
	defer func() {
		// The subscription's goroutine closes ch once done closed its
		// socket; it may be blocked sending until then.
		close(done)
		for range ch {
		}
	}()
	// Listed after subscribing: a change in between is both listed and
	// notified, and applying it twice is harmless.
	if err := s.relist(); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case u, ok := <-ch:
			if !ok {
				return errStopped
			}
			if a, ok := netip.AddrFromSlice(u.LinkAddress.IP); ok {
				s.update(a, u.NewAddr)
			}
		}
	}
}

// relist replaces the set with the addresses listed now.
func (s *Set) relist() error {
	h, err := netlink.NewHandleAt(s.ns)
	if err != nil {
		return fmt.Errorf("%w: %w", errList, err)
	}
	defer h.Close()
	list, err := h.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("%w: %w", errList, err)
	}
	addrs := make(map[netip.Addr]struct{}, len(list))
	for _, a := range list {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			addrs[ip.Unmap()] = struct{}{}
		}
	}
	s.replace(addrs)
	return nil
}
