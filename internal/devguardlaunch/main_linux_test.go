package devguardlaunch

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/marshal-dev/marshal/internal/devguardwire"
	"github.com/marshal-dev/marshal/internal/peer"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// helperRoleEnv, when set, makes this test binary the helper itself:
// Main with the binary's arguments, as marshal-devguard-launch runs it.
const helperRoleEnv = "MARSHAL_TEST_DEVGUARD_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperRoleEnv) != "" {
		os.Exit(Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// answerLost serves one session on a socket of its own as an authority
// would, until the helper's launch: hello is answered with the bounds
// and the peers a helper checks, and then the session ends without an
// answer to the launch. It is the one fault the real authority cannot
// show on demand: an answer lost. The returned channel receives the
// method of the request that went unanswered.
func answerLost(t *testing.T) (string, <-chan string) {
	t.Helper()
	path := filepath.Join(testutil.ShortDir(t), "authority.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	unanswered := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		cred, err := peer.Credentials(c.(*net.UnixConn))
		if err != nil {
			return
		}
		if _, err := devguardwire.ReadFrame(c, nil, testutil.Deadline); err != nil {
			return
		}
		hello := fmt.Sprintf(`{"version":1,"request_id":1,"body":{"result":"hello","value":{"protocol":1,`+
			`"authority":{"uid":%d,"pid":%d},"caller":{"uid":%d,"pid":%d},"capabilities":["fenced_launch"],`+
			`"max_frame_bytes":65536,"frame_deadline_ms":250,"max_sessions":32}}}`, os.Geteuid(), os.Getpid(), cred.UID, cred.PID)
		if err := devguardwire.WriteFrame(c, []byte(hello), testutil.Deadline); err != nil {
			return
		}
		frame, err := devguardwire.ReadFrame(c, nil, testutil.Deadline)
		if err != nil {
			return
		}
		var req struct {
			Body struct {
				Method string `json:"method"`
			} `json:"body"`
		}
		json.Unmarshal(frame, &req)
		unanswered <- req.Body.Method
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return path, unanswered
}

// A launch whose answer never comes is no authorization: the helper
// reports it refused, resource_control_unavailable (the outcome is not
// known), exits 125 and never execs its program.
func TestALostAnswerIsNeverAnExec(t *testing.T) {
	sock, unanswered := answerLost(t)
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Write(fds[1], []byte(strings.Repeat("ab", 32))); err != nil {
		t.Fatal(err)
	}
	unix.Close(fds[1])
	permit := os.NewFile(uintptr(fds[0]), "permit")
	report, reportW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer report.Close()
	marker := filepath.Join(t.TempDir(), "ran")
	cmd := exec.Command(os.Args[0], "--endpoint", sock, "--consumer", "codespace", "--generation", "g1", "--attempt", "a-1",
		"--instance", "codespace-1", "--permit-fd", "3", "--report-fd", "4", "--", "/usr/bin/touch", marker)
	cmd.Env = append(os.Environ(), helperRoleEnv+"=1")
	cmd.ExtraFiles = []*os.File{permit, reportW}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	permit.Close()
	reportW.Close()
	report.SetReadDeadline(time.Now().Add(testutil.Deadline))
	transcript, err := io.ReadAll(report)
	if err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitNotAuthorized {
		t.Errorf("the helper ended %v, want exit %d", err, ExitNotAuthorized)
	}
	var line map[string]any
	if lines := strings.Split(strings.TrimSuffix(string(transcript), "\n"), "\n"); len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &line) != nil ||
		line["phase"] != "refused" || line["code"] != string(devguardwire.CodeResourceControlUnavailable) {
		t.Errorf("transcript %q, want one line: refused, resource_control_unavailable", transcript)
	}
	select {
	case m := <-unanswered:
		if m != string(devguardwire.MethodLaunch) {
			t.Errorf("the request left unanswered was %q, want launch", m)
		}
	default:
		t.Error("the helper never presented its launch")
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the program ran: %v", err)
	}
}
