package launch

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/internal/admission"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// A pinned process is its own until it exits: the pidfd says when, with no
// polling, and a start time that is not its own is refused.
func TestPinFollowsTheProcess(t *testing.T) {
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	reaped := make(chan struct{})
	go func() { cmd.Wait(); close(reaped) }()
	defer func() { cmd.Process.Kill(); <-reaped }()
	pid := cmd.Process.Pid

	p, err := Pin(pid, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	start, err := admission.Procfs{}.StartTime(pid)
	if err != nil || p.StartTime != start || p.PID != pid {
		t.Fatalf("pinned %+v, want pid %d started at %d (%v)", p, pid, start, err)
	}
	if _, err := Pin(pid, 0, start+1); !errors.Is(err, ErrProcessGone) {
		t.Errorf("Pin with another start time = %v, want ErrProcessGone", err)
	}
	if p.Exited() {
		t.Fatal("Exited while running")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := p.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with an ended context = %v", err)
	}

	waited := make(chan error, 1)
	go func() { waited <- p.Wait(t.Context()) }()
	cmd.Process.Kill()
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("Wait = %v", err)
		}
	case <-time.After(testutil.Deadline):
		t.Fatal("Wait did not return when the process exited")
	}
	if !p.Exited() {
		t.Error("not Exited after the exit")
	}
	<-reaped
	if _, err := Pin(pid, 0, start); !errors.Is(err, ErrProcessGone) {
		t.Errorf("Pin of a reaped process = %v, want ErrProcessGone", err)
	}
}

// Closing a Process ends a Wait in progress.
func TestCloseEndsWait(t *testing.T) {
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	p, err := Pin(cmd.Process.Pid, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- p.Wait(t.Context()) }()
	p.Close()
	select {
	case err := <-waited:
		if err == nil {
			t.Fatal("Wait after Close = nil, want an error")
		}
	case <-time.After(testutil.Deadline):
		t.Fatal("Close did not end Wait")
	}
	if !p.Exited() || p.Close() != nil {
		t.Error("a closed Process must report exited and close again without error")
	}
}

// The caller of a request is the process at the other end of its
// connection, as the kernel recorded it.
func TestPinPeerIsTheConnectingProcess(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	conn, err := ln.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	p, err := PinPeer(conn)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.PID != os.Getpid() || p.UID != uint32(os.Getuid()) || p.StartTime == 0 || p.Exited() {
		t.Fatalf("peer = %+v, want this process, running", p)
	}
}
