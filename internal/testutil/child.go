package testutil

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Child is a real process a test started, with pipes to its standard
// input and output, waited for by a goroutine of its own. It is killed
// and reaped when the test ends, if it did not exit before.
type Child struct {
	// Cmd is the started command.
	Cmd *exec.Cmd

	stdin  *os.File
	stdout *bufio.Reader
	done   chan struct{} // closed once it exited and was reaped
	err    error         // Wait's result, once done is closed
}

// StartChild starts cmd, whose Stdin and Stdout must be unset; an unset
// Stderr is the test's. It fails t when cmd cannot start.
func StartChild(t testing.TB, cmd *exec.Cmd) *Child {
	t.Helper()
	if cmd.Stdin != nil || cmd.Stdout != nil {
		t.Fatal("testutil.StartChild: cmd.Stdin and cmd.Stdout must be unset")
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		t.Fatal(err)
	}
	// Plain files, not StdinPipe/StdoutPipe: Wait then leaves them alone,
	// and stdout reads to EOF once every process holding it is gone.
	cmd.Stdin, cmd.Stdout = inR, outW
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		t.Fatalf("starting %s: %v", cmd.Path, err)
	}
	c := &Child{Cmd: cmd, stdin: inW, stdout: bufio.NewReader(outR), done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		c.Kill()
		<-c.done
		inW.Close()
		outR.Close()
	})
	return c
}

// PID is the child's process ID.
func (c *Child) PID() int { return c.Cmd.Process.Pid }

// Say writes line and a newline to the child's standard input.
func (c *Child) Say(t testing.TB, line string) {
	t.Helper()
	if _, err := io.WriteString(c.stdin, line+"\n"); err != nil {
		t.Fatalf("writing to pid %d: %v", c.PID(), err)
	}
}

// Line reads the next line the child prints, without surrounding white
// space.
func (c *Child) Line(t testing.TB) string {
	t.Helper()
	s, err := c.stdout.ReadString('\n')
	if err != nil {
		t.Fatalf("reading from pid %d: %v", c.PID(), err)
	}
	return strings.TrimSpace(s)
}

// Fields reads what the child prints until its standard output is closed
// (by it and by every process it passed it to), split at white space.
func (c *Child) Fields(t testing.TB) []string {
	t.Helper()
	b, err := io.ReadAll(c.stdout)
	if err != nil {
		t.Fatalf("reading from pid %d: %v", c.PID(), err)
	}
	return strings.Fields(string(b))
}

// Kill sends the child SIGKILL; Wait then reports it. A child already
// reaped is left alone (os.Process never signals a reused pid).
func (c *Child) Kill() { c.Cmd.Process.Kill() }

// Exited reports whether the child has exited and been reaped.
func (c *Child) Exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Wait waits for the child to exit and returns what exec.Cmd.Wait said;
// it fails t when the child runs on past Deadline.
func (c *Child) Wait(t testing.TB) error {
	t.Helper()
	timer := time.NewTimer(Deadline)
	defer timer.Stop()
	select {
	case <-c.done:
		return c.err
	case <-timer.C:
		t.Fatalf("pid %d did not exit within %v", c.PID(), Deadline)
		return nil
	}
}

// KilledBy reports whether err, from Wait, says the process died of
// signal sig.
func KilledBy(err error, sig syscall.Signal) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}
