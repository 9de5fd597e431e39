package admission

import (
	"errors"
	"os"
	"os/exec"
	"regexp"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseStatCountsFieldsAfterTheLastParenthesis(t *testing.T) {
	rest := " 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 12345 0 0 0"
	for _, tc := range []struct {
		name  string
		line  string
		state byte
		start uint64
		ok    bool
	}{
		{"plain", "42 (sleep) S 1" + rest, 'S', 12345, true},
		{"name_with_space_and_parens", "42 (a) (b c) R 1" + rest, 'R', 12345, true},
		{"zombie", "42 (x) Z 1" + rest, 'Z', 12345, true},
		{"no_name", "42 sleep S 1", 0, 0, false},
		{"too_short", "42 (sleep) S 1 0 0", 0, 0, false},
		{"start_not_a_number", "42 (x) S 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 x 0 0 0", 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state, start, err := ParseStat([]byte(tc.line))
			if (err == nil) != tc.ok || state != tc.state || start != tc.start {
				t.Fatalf("ParseStat(%q) = %c, %d, %v; want %c, %d, ok %v", tc.line, state, start, err, tc.state, tc.start, tc.ok)
			}
		})
	}
}

// The real /proc: a live child has a start time; once it exits it has
// none, zombie or reaped.
func TestProcfsKnowsWhenAProcessIsGone(t *testing.T) {
	var p Procfs
	boot, err := p.BootID()
	if err != nil || !regexp.MustCompile(`^[0-9a-f-]{36}$`).MatchString(boot) {
		t.Fatalf("BootID() = %q, %v", boot, err)
	}
	self, err := p.StartTime(os.Getpid())
	if err != nil || self == 0 {
		t.Fatalf("StartTime(self) = %d, %v", self, err)
	}
	cmd := exec.Command("sh", "-c", "read line")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	start, err := p.StartTime(pid)
	if err != nil || start < self {
		t.Fatalf("StartTime(child) = %d, %v; want a start after ours (%d)", start, err, self)
	}
	stdin.Close() // the child reads EOF and exits
	var info unix.Siginfo
	// Wait for the exit without reaping: the child is a zombie now.
	if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := p.StartTime(pid); !errors.Is(err, ErrNoProcess) {
		t.Fatalf("StartTime(zombie) = %v, want %v", err, ErrNoProcess)
	}
	cmd.Wait()
	if _, err := p.StartTime(pid); !errors.Is(err, ErrNoProcess) {
		t.Fatalf("StartTime(reaped) = %v, want %v", err, ErrNoProcess)
	}
	if _, err := p.StartTime(0); !errors.Is(err, ErrNoProcess) {
		t.Fatalf("StartTime(0) = %v, want %v", err, ErrNoProcess)
	}
}
