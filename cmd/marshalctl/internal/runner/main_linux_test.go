package runner

import (
	"os"
	"syscall"
	"testing"
)

// dieByTERM, set in the environment, makes the test binary die by
// SIGTERM through dieBy, then exit 3 if it still can.
const dieByTERM = "MARSHALCTL_TEST_DIE_BY_TERM"

func TestMain(m *testing.M) {
	if os.Getenv(dieByTERM) == "1" {
		dieBy(syscall.SIGTERM)
		os.Exit(3)
	}
	os.Exit(m.Run())
}
