package hostaddr

import (
	"testing"

	"go.uber.org/goleak"
)

// The netlink subscription's goroutines end with Run.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
