//go:build linux

package test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/internal/testutil"
)

// shellBlocks returns the ```sh blocks of a Markdown file, in order.
func shellBlocks(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)```sh\n(.*?)```")
	var blocks []string
	for _, m := range re.FindAllStringSubmatch(string(data), -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// TestGettingStarted follows docs/getting-started.md as a newcomer would,
// block by block, on the binaries this package built: the steps must work
// as written. Two things differ, and only these: `make build` is already
// done, and marshald gets a private cgroup root (the machine is shared).
func TestGettingStarted(t *testing.T) {
	tree := testutil.NewCgroupTree(t)
	dir := t.TempDir()
	env := append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "HOME="+dir, "GORACE=atexit_sleep_ms=0")
	var exports []string
	var outputs bytes.Buffer
	blocks := shellBlocks(t, "../docs/getting-started.md")
	if len(blocks) < 5 {
		t.Fatalf("getting-started.md has %d shell blocks; the test expects the documented steps", len(blocks))
	}
	for i, block := range blocks {
		if line, ok := strings.CutPrefix(strings.TrimSpace(block), "marshald "); ok {
			startDocDaemon(t, dir, env, exports, strings.TrimSuffix(strings.TrimSpace(line), "&"), tree.Rel+"/marshal")
			continue
		}
		script := strings.ReplaceAll(block, "make build\n", "")
		ctx, cancel := context.WithTimeout(t.Context(), testutil.Deadline)
		cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", strings.Join(exports, "\n")+"\n"+script)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		cancel()
		outputs.Write(out)
		if err != nil {
			t.Fatalf("block %d failed: %v\n%s\n--- output\n%s", i+1, err, script, out)
		}
		for _, l := range strings.Split(script, "\n") {
			if strings.HasPrefix(l, "export ") {
				exports = append(exports, l)
			}
		}
	}
	got := outputs.String()
	for _, want := range []string{
		"valid: 2 objects",   // validate
		"project",            // get workspaces
		"hello from project", // the agent ran in its workspace
		"profile coder",      // and identify, inside it, named its profile
		"workspace project",  // and the workspace marshald launched it in
		"Name:       coder",  // describe
		"wrote notes.txt",    // a confined agent writes its workspace,
		"secrets hidden",     // cannot read a none path,
		"home is read-only",  // nor write outside
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the documented steps did not show %q; they printed:\n%s", want, got)
		}
	}
}

// startDocDaemon starts marshald as the doc's line says, with a private
// cgroup root, pressure off (the test machine's load must not decide
// what is admitted) and no egress proxy on a fixed port (tests run at
// once), and waits until it is ready.
func startDocDaemon(t *testing.T, dir string, env, exports []string, args, cgroupRoot string) {
	t.Helper()
	log := &syncBuffer{wake: make(chan struct{}, 1)}
	cmd := exec.Command("bash", "-c", strings.Join(exports, "\n")+"\nexec marshald "+args+" --backend cgroupfs --cgroup-root "+cgroupRoot+" --pressure off --egress-address off")
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(testutil.Deadline):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("marshald log:\n%s", log.String())
		}
	})
	deadline := time.NewTimer(testutil.Deadline)
	defer deadline.Stop()
	for !strings.Contains(log.String(), "msg=ready") {
		select {
		case <-log.wake:
		case err := <-exited:
			t.Fatalf("marshald exited: %v\n%s", err, log.String())
		case <-deadline.C:
			t.Fatalf("marshald not ready:\n%s", log.String())
		}
	}
}
