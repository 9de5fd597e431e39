package reconcile_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// controller started by a test must have stopped, workers and queue alike.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
