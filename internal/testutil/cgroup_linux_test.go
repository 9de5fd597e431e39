package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

func TestCgroupTreeRemovesItselfAndItsProcesses(t *testing.T) {
	c := NewCgroupTree(t)
	child := c.V2("a", "b")
	if err := os.MkdirAll(child, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	if err := os.WriteFile(filepath.Join(child, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Remove(); err != nil {
		t.Fatal(err)
	}
	if c.Exists() {
		t.Fatalf("tree %s still exists after Remove", c.Rel)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatal("process in the tree survived Remove")
	}
}
