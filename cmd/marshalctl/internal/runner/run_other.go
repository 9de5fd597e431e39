//go:build !linux

package runner

import (
	"context"
	"errors"

	"github.com/marshal-dev/marshal/internal/localapi"
)

// runTerm is what run decided about the terminal.
type runTerm struct {
	pty    bool
	detach bool
}

// runTerminal: agents run on Linux only.
func runTerminal(o Options) (runTerm, error) {
	return runTerm{}, &ExitError{Code: ExitFailure, Err: errors.New("run needs Linux: agents run in cgroup scopes")}
}

// execPlan: agents run on Linux only.
func execPlan(p *localapi.ExecPlan, term runTerm) error { return errors.ErrUnsupported }

// superviseRun: agents run on Linux only.
func superviseRun(ctx context.Context, s Streams, socket string, o Options, argv []string) error {
	return &ExitError{Code: ExitFailure, Err: errors.New("run needs Linux: agents run in cgroup scopes")}
}

// reportLaunch: agents run on Linux only.
func reportLaunch(fd int, p *localapi.ExecPlan) {}
