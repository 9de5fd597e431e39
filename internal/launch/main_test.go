package launch

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine the launch path starts is stopped and waited for.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
