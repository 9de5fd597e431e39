package testutil

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// NetNamespace is a network namespace a test made: it holds loopback, up,
// and whatever the test adds. It goes when the test ends and nothing
// holds it any more.
type NetNamespace struct {
	Handle netns.NsHandle
}

// NewNetNamespace makes a network namespace for t. It skips t when the
// process may not make one (it needs root).
func NewNetNamespace(t testing.TB) *NetNamespace {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a network namespace")
	}
	var ns netns.NsHandle
	err := onThread(func() error {
		var err error
		ns, err = netns.New()
		return err
	})
	if err != nil {
		t.Fatalf("making a network namespace: %v", err)
	}
	n := &NetNamespace{Handle: ns}
	t.Cleanup(func() { ns.Close() })
	n.Do(t, func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(lo)
	})
	return n
}

// Do runs fn on a thread in the namespace: the sockets and devices it
// makes are the namespace's. It fails t when fn fails.
func (n *NetNamespace) Do(t testing.TB, fn func() error) {
	t.Helper()
	err := onThread(func() error {
		if err := netns.Set(n.Handle); err != nil {
			return fmt.Errorf("entering the namespace: %w", err)
		}
		return fn()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// AddInterface adds a TUN device named name, up, with the address
// prefix, to the namespace. TUN is used as it is the device the kernels
// of test machines build in most often (dummy and veth are modules).
func (n *NetNamespace) AddInterface(t testing.TB, name string, prefix netip.Prefix) {
	t.Helper()
	n.Do(t, func() error {
		tun := &netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: name}, Mode: netlink.TUNTAP_MODE_TUN}
		if err := netlink.LinkAdd(tun); err != nil {
			return fmt.Errorf("adding %s: %w", name, err)
		}
		for _, f := range tun.Fds {
			f.Close()
		}
		link, err := netlink.LinkByName(name)
		if err != nil {
			return err
		}
		addr := &netlink.Addr{IPNet: netipNet(prefix)}
		if err := netlink.AddrAdd(link, addr); err != nil {
			return fmt.Errorf("adding %s to %s: %w", prefix, name, err)
		}
		return netlink.LinkSetUp(link)
	})
}

// RemoveAddress removes the address prefix from the interface name.
func (n *NetNamespace) RemoveAddress(t testing.TB, name string, prefix netip.Prefix) {
	t.Helper()
	n.Do(t, func() error {
		link, err := netlink.LinkByName(name)
		if err != nil {
			return err
		}
		return netlink.AddrDel(link, &netlink.Addr{IPNet: netipNet(prefix)})
	})
}

// onThread runs fn on a locked thread of its own, never the main one; a
// thread fn left in another namespace is not unlocked, so the runtime
// ends it with the goroutine instead of reusing it.
func onThread(fn func() error) error {
	errc := make(chan error, 1)
	GoOffMainThread(func() {
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		err = fn()
		if rerr := netns.Set(orig); rerr != nil {
			errc <- fmt.Errorf("leaving the namespace: %w", rerr)
			return
		}
		runtime.UnlockOSThread()
		errc <- err
	})
	return <-errc
}

func netipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// Listen listens on address in the namespace.
func (n *NetNamespace) Listen(t testing.TB, network, address string) net.Listener {
	t.Helper()
	var ln net.Listener
	n.Do(t, func() error {
		var err error
		ln, err = net.Listen(network, address)
		return err
	})
	t.Cleanup(func() { ln.Close() })
	return ln
}

// DialContext dials address from the namespace: the socket is made on a
// thread in it.
func (n *NetNamespace) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	var c net.Conn
	err := onThread(func() error {
		if err := netns.Set(n.Handle); err != nil {
			return fmt.Errorf("entering the namespace: %w", err)
		}
		var err error
		var d net.Dialer
		c, err = d.DialContext(ctx, network, address)
		return err
	})
	return c, err
}
