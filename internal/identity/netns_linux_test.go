package identity

import (
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/marshal-dev/marshal/internal/testutil"
)

// OpenNetNS names a process's namespace by its pidfd: a child in this
// process's namespace has this one's, one in a namespace of its own
// another, and a process gone is ErrNoProcess.
func TestOpenNetNSNamesTheProcesssNamespace(t *testing.T) {
	self, err := SelfNetNS()
	if err != nil {
		t.Fatal(err)
	}
	same := testutil.StartChild(t, exec.Command("cat"))
	if ns := netnsOf(t, same.PID()); ns != self {
		t.Errorf("a child's namespace %v, want this process's %v", ns, self)
	}
	if err := exec.Command("unshare", "--user", "--map-current-user", "--net", "true").Run(); err != nil {
		t.Skipf("needs unshare and user namespaces: %v", err)
	}
	other := testutil.StartChild(t, exec.Command("unshare", "--user", "--map-current-user", "--net", "sh", "-c", "echo ready; exec cat"))
	if got := other.Line(t); got != "ready" {
		t.Fatalf("the child said %q", got)
	}
	if ns := netnsOf(t, other.PID()); ns == self || ns.IsZero() {
		t.Errorf("a child in a namespace of its own: %v, want another than %v", ns, self)
	}
	fd, err := unix.PidfdOpen(other.PID(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	other.Kill()
	other.Wait(t)
	if _, _, err := OpenNetNS(fd, other.PID()); err == nil {
		t.Error("OpenNetNS of a reaped process succeeded")
	}
}

func netnsOf(t *testing.T, pid int) NetNS {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Skipf("needs pidfd_open: %v", err)
	}
	defer unix.Close(fd)
	f, ns, err := OpenNetNS(fd, pid)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	return ns
}
