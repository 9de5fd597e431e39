package launch

import (
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// An agent the kernel OOM-kills under its scope's memory limit leaves
// that as evidence: its attempt is released, and records the OOM kill.
func TestOOMKillIsEvidence(t *testing.T) {
	h := newHarness(t)
	if h.fake || h.caps[cgroup.Memory].Level != v1alpha1.LevelKernel {
		t.Skip("needs a memory controller that marshal can limit a scope with")
	}
	w := h.workspace("web", v1alpha1.ParticipationRequired, 1)
	*w.Spec.Resources.Request.MemoryBytes = 32 << 20
	w.Spec.Resources.Request.Minimum.Memory = v1alpha1.LevelKernel
	h.start()

	// The caller waits to be in its scope, then grows one line without
	// end: tail holds it all, and is OOM-killed.
	cmd := exec.Command("sh", "-c", "read x; head -c 1073741824 /dev/zero | tail -n 1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	p, err := Pin(cmd.Process.Pid, uint32(os.Getuid()), 0)
	if err != nil {
		t.Fatal(err)
	}
	req := h.request("web")
	pe, err := h.l.Prepare(t.Context(), req, p)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pe.Launch(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(stdin, "go\n")
	select {
	case <-done:
	case <-time.After(testutil.Deadline):
		t.Fatal("the caller did not run into its memory limit")
	}
	h.settle(plan)
	if r := h.lookup(plan.Attempt); !r.OOMKilled || r.Phase != "released" {
		t.Errorf("attempt after the OOM kill: %s, oom_killed %v; want released, oom_killed", r.Phase, r.OOMKilled)
	}
}
