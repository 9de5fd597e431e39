package controllers_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: every
// manager a test started must have stopped its controllers and observer.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
