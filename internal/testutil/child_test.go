package testutil

import (
	"os/exec"
	"slices"
	"syscall"
	"testing"
)

func TestChildTalksAndExits(t *testing.T) {
	c := StartChild(t, exec.Command("/bin/sh", "-c", `read x; echo "got $x"; echo a b; exit 3`))
	if c.Exited() {
		t.Fatal("Exited before the child was told to go on")
	}
	c.Say(t, "hello")
	if got := c.Line(t); got != "got hello" {
		t.Errorf("Line = %q, want %q", got, "got hello")
	}
	if got := c.Fields(t); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("Fields = %q, want [a b]", got)
	}
	err := c.Wait(t)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 || KilledBy(err, syscall.SIGKILL) {
		t.Errorf("Wait = %v, want exit status 3", err)
	}
	if !c.Exited() {
		t.Error("Exited = false after Wait returned")
	}
	c.Kill() // a reaped child is left alone
}

func TestChildKilled(t *testing.T) {
	c := StartChild(t, exec.Command("sleep", "600"))
	c.Kill()
	if err := c.Wait(t); !KilledBy(err, syscall.SIGKILL) {
		t.Errorf("Wait = %v, want killed by SIGKILL", err)
	}
	if KilledBy(nil, syscall.SIGKILL) {
		t.Error("KilledBy(nil) = true")
	}
}
