package runner

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/marshal-dev/marshal/internal/localapi"
)

// superviseRun runs a launch with a timeout in a child marshalctl, which
// marshald moves into the scope and which execs the agent, and waits for
// it here, outside the scope: when the timeout kills the agent's tree,
// someone is left to say so. The child's exit status is run's; an agent
// that a signal ended ends this process with that signal, as a shell
// would see it, but for the timeout's kill, which is said on standard
// error and ends run with 137.
//
// The terminal's signals (Ctrl-C, Ctrl-\, Ctrl-Z) reach the agent from
// the terminal, as they would without a timeout, and this process stops
// with it on Ctrl-Z; SIGTERM and SIGHUP sent to run are passed on.
func superviseRun(ctx context.Context, s Streams, socket string, o Options, argv []string) error {
	self, err := os.Executable()
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("finding marshalctl to run the launch: %w", err)}
	}
	report, reportW, err := os.Pipe()
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: err}
	}
	defer report.Close()
	args := []string{"--socket", socket, "run", "--report-fd=3", "-w", o.Workspace, "--timeout", o.Timeout.String()}
	switch {
	case o.PTY:
		args = append(args, "--pty")
	case o.NoPTY:
		args = append(args, "--no-pty")
	}
	if o.Output != "" {
		args = append(args, "-o", o.Output)
	}
	cmd := exec.Command(self, append(append(args, "--"), argv...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s.In, s.Out, s.Err
	cmd.ExtraFiles = []*os.File{reportW}

	// The child must start with the dispositions run started with, as an
	// agent run without a timeout execs with them.
	AwaitInterrupts(ctx)
	RestoreInterrupts(ctx)
	forward := make(chan os.Signal, 4)
	signal.Notify(forward, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(forward)

	started := time.Now()
	err = cmd.Start()
	reportW.Close()
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("starting the launch: %w", err)}
	}
	launched := make(chan string, 1)
	go func() {
		data, _ := io.ReadAll(io.LimitReader(report, 4096))
		launched <- strings.TrimSpace(string(data))
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case sig := <-forward:
			cmd.Process.Signal(sig)
			continue
		case <-done:
		}
		break
	}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ws.Exited() && ws.ExitStatus() == 0:
		return nil
	case ws.Exited():
		return &ExitError{Code: ws.ExitStatus(), Silent: true}
	case !ws.Signaled():
		return &ExitError{Code: ExitRunInternal, Err: fmt.Errorf("the launch ended with %v", cmd.ProcessState)}
	}
	sig := ws.Signal()
	if sig == syscall.SIGKILL && time.Since(started) >= o.Timeout {
		scope, attempt, _ := strings.Cut(<-launched, " ")
		fmt.Fprintf(s.Err, "marshalctl: --timeout %s expired: marshald killed the agent and every process it started (scope %s, attempt %s)\n",
			o.Timeout, OrDash(scope), OrDash(attempt))
		return &ExitError{Code: 128 + int(syscall.SIGKILL), Silent: true}
	}
	dieBy(sig)
	return &ExitError{Code: 128 + int(sig), Silent: true}
}

// dieBy ends this process by sig, as the agent died, so that a shell sees
// the same. The signal goes to this thread, not the process: a signal to
// the process may be taken by another thread while this one goes on to
// exit with a status, and the exit wins. Sent to this thread it is
// delivered as the call returns, and the runtime's action for a signal
// nothing watches (to die by it) runs before anything after the call. It
// returns only when sig does not end a process.
func dieBy(sig syscall.Signal) {
	signal.Reset(sig)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	syscall.Tgkill(syscall.Getpid(), syscall.Gettid(), sig)
}

// reportLaunch tells the marshalctl that supervises this launch which
// scope and attempt it runs in, on the descriptor it gave: a line of two
// words, then the end of the stream.
func reportLaunch(fd int, p *localapi.ExecPlan) {
	f := os.NewFile(uintptr(fd), "report")
	if f == nil {
		return
	}
	fmt.Fprintf(f, "%s %s\n", p.Scope, p.Attempt)
	f.Close()
}
