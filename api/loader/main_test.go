package loader

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine, such as one of
// LoadDir's workers, outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
