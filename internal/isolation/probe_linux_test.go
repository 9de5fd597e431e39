package isolation

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/marshal-dev/marshal/internal/testutil"
)

// Probe says what the real helper says: available here, or the helper's
// own reason in a user namespace whose limit is 0.
func TestProbeRunsTheHelper(t *testing.T) {
	helper, err := testutil.BuildConfine(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := Probe(t.Context(), helper); err != nil {
		t.Skipf("netns isolation is not available here: %v", err)
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare")
	}
	// A helper that forbids itself: the user namespace's limit is 0 where
	// it runs.
	wrapper := filepath.Join(t.TempDir(), "marshal-confine")
	script := "#!/bin/sh\nexec unshare --user --map-root-user sh -c 'echo 0 > /proc/sys/user/max_user_namespaces && exec \"$0\" \"$@\"' " + helper + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	err = Probe(t.Context(), wrapper)
	var ue *UnavailableError
	if !errors.As(err, &ue) || ue.Reason != "the user namespace limit is reached (user.max_user_namespaces) (errno 28)" {
		t.Errorf("Probe = %v, want the limit named", err)
	}
}
