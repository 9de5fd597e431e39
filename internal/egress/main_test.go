package egress

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(clientEnv); mode != "" {
		os.Exit(runClient(mode, os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}
