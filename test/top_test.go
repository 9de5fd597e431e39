//go:build linux

package test

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// allocateStep is how much the allocate role adds at each line it reads.
const allocateStep = 48 << 20

// TestTopShowsMemoryRising runs an agent that allocates memory a step
// at a time, when told, and wants marshalctl top to show its memory
// rising between the steps.
func TestTopShowsMemoryRising(t *testing.T) {
	root := t.TempDir()
	d := startLaunchDaemon(t, launchManifests(root, roomy, launchWorkspace{name: "web", participation: "required", maxLive: 1,
		request: fmt.Sprintf("      memory_bytes: %d\n      minimum: {memory: kernel}\n", 512<<20)}), "web")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := d.runCmd("-w", "web", "--", exe)
	cmd.Env = append(cmd.Env, childRoleEnv+"=allocate")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	lines := bufio.NewScanner(stdout)
	// step tells the agent to allocate one more step and waits until it
	// has touched every page of it.
	step := func() {
		t.Helper()
		fmt.Fprintln(stdin, "more")
		if !lines.Scan() {
			if strings.Contains(stderr.String(), "RESOURCE_POLICY_UNSUPPORTED") {
				t.Skip("needs a memory controller that marshal can limit a scope with")
			}
			t.Fatalf("the agent ended: %s", stderr.String())
		}
	}
	memory := func() int64 {
		t.Helper()
		out := d.mustCtl("top", "--interval", "50ms", "--sort", "memory")
		rows := strings.Split(strings.TrimSpace(out), "\n")
		if len(rows) != 2 || !strings.HasPrefix(rows[0], "SCOPE ") {
			t.Fatalf("top printed\n%s\nwant a header and one agent", out)
		}
		cells := strings.Fields(rows[1])
		if len(cells) < 6 || cells[1] != "coder" || cells[2] != "web" {
			t.Fatalf("top's row %q, want the agent of coder in web", rows[1])
		}
		return parseIEC(t, cells[4])
	}
	step()
	first := memory()
	step()
	step()
	second := memory()
	if second-first < allocateStep {
		t.Errorf("top's memory went from %d to %d bytes after the agent allocated %d more; want it to rise by at least %d",
			first, second, 2*allocateStep, allocateStep)
	}
}

// parseIEC reads what quantity.Bytes writes: "512B", "48MiB", "1.5GiB".
func parseIEC(t *testing.T, s string) int64 {
	t.Helper()
	shift := 0
	for i, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		if n, ok := strings.CutSuffix(s, u); ok {
			s, shift = n, 10*(i+1)
			break
		}
	}
	s = strings.TrimSuffix(s, "B")
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("memory %q: %v", s, err)
	}
	return int64(v * float64(int64(1)<<shift))
}

// allocate is the agent of TestTopShowsMemoryRising: at each line read,
// it allocates one more step, touches every page and says so.
func allocate() int {
	var held [][]byte
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		b := make([]byte, allocateStep)
		for i := 0; i < len(b); i += os.Getpagesize() {
			b[i] = 1
		}
		held = append(held, b)
		fmt.Println("allocated", len(held))
	}
	return 0
}
