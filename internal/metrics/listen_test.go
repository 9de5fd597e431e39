package metrics

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"syscall"
	"testing"

	"github.com/marshal-dev/marshal/internal/testutil"
)

func TestListenTCP(t *testing.T) {
	tests := []struct {
		name        string
		addr        string
		notLoopback bool // the error wraps ErrNotLoopback
		wantErr     string
	}{
		{name: "ipv4_loopback", addr: "127.0.0.1:0"},
		{name: "ipv4_loopback_other", addr: "127.0.0.2:0"},
		{name: "ipv6_loopback", addr: "[::1]:0"},
		{name: "localhost", addr: "localhost:0"},
		{name: "every_interface_empty", addr: ":0", notLoopback: true, wantErr: "every interface"},
		{name: "every_interface_ipv4", addr: "0.0.0.0:9090", notLoopback: true, wantErr: "0.0.0.0"},
		{name: "every_interface_ipv6", addr: "[::]:9090", notLoopback: true},
		{name: "private_address", addr: "10.0.0.1:9090", notLoopback: true},
		{name: "public_address", addr: "192.0.2.7:9090", notLoopback: true},
		{name: "link_local_with_zone", addr: "[fe80::1%lo]:9090", notLoopback: true},
		{name: "mapped_public", addr: "[::ffff:192.0.2.7]:9090", notLoopback: true},
		{name: "no_port", addr: "127.0.0.1", wantErr: "HOST:PORT"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := ListenTCP(t.Context(), tc.addr)
			if tc.notLoopback || tc.wantErr != "" {
				if err == nil {
					ln.Close()
					t.Fatalf("ListenTCP(%q) listened on %v, want an error", tc.addr, ln.Addr())
				}
				if errors.Is(err, ErrNotLoopback) != tc.notLoopback {
					t.Errorf("ListenTCP(%q) = %v; wraps ErrNotLoopback: %v, want %v", tc.addr, err, !tc.notLoopback, tc.notLoopback)
				}
				if !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), tc.addr) {
					t.Errorf("ListenTCP(%q) = %q, want it to name the address and say %q", tc.addr, err, tc.wantErr)
				}
				return
			}
			if errors.Is(err, syscall.EADDRNOTAVAIL) {
				t.Skipf("this host has no %s: %v", tc.addr, err)
			}
			if err != nil {
				t.Fatalf("ListenTCP(%q) = %v, want a listener", tc.addr, err)
			}
			defer ln.Close()
			ap, err := netip.ParseAddrPort(ln.Addr().String())
			if err != nil || !ap.Addr().IsLoopback() {
				t.Errorf("ListenTCP(%q) listens on %v, want a loopback address", tc.addr, ln.Addr())
			}
		})
	}
}

func TestServeStopsWithContext(t *testing.T) {
	m, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := ListenTCP(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Serve(ctx, ln) }()
	url := "http://" + ln.Addr().String() + "/metrics"
	if s := get(t, url); s.value(t, "marshal_build_info") != 1 {
		t.Errorf("marshal_build_info = %v, want 1", s.value(t, "marshal_build_info"))
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve after cancel = %v, want nil", err)
	}
	testutil.ListenerClosed(t, ln)
}
