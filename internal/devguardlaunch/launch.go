package devguardlaunch

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/devguardwire"
)

// Exit statuses, as devguard-launch's.
const (
	ExitNotAuthorized = 125
	ExitExecFailed    = 126
	ExitNotFound      = 127
)

// Bounds of the report, as devguard-launch's.
const (
	maxMessage    = 256
	maxTranscript = 8 * 1024
	permitLen     = 64
	permitTimeout = 250 * time.Millisecond
)

// args are the helper's arguments.
type args struct {
	endpoint           string
	key                devguardwire.Key
	instance           string
	permitFD, reportFD int
	program            string
	argv               []string
}

// parse reads the arguments, or returns false: nothing is reported then,
// there being no report descriptor to trust.
func parse(raw []string) (args, bool) {
	var a args
	seen := map[string]bool{}
	i := 0
	for ; i < len(raw); i += 2 {
		opt := raw[i]
		if opt == "--" {
			break
		}
		if i+1 >= len(raw) || seen[opt] {
			return args{}, false
		}
		seen[opt] = true
		v := raw[i+1]
		switch opt {
		case "--endpoint":
			a.endpoint = v
		case "--consumer":
			a.key.ConsumerID = v
		case "--generation":
			a.key.ConsumerGeneration = v
		case "--attempt":
			a.key.AttemptID = v
		case "--instance":
			a.instance = v
		case "--permit-fd":
			a.permitFD = descriptor(v)
		case "--report-fd":
			a.reportFD = descriptor(v)
		case "--stage":
			if v != "clamped" {
				return args{}, false
			}
		default:
			return args{}, false
		}
	}
	if i >= len(raw) || raw[i] != "--" || i+1 >= len(raw) {
		return args{}, false
	}
	a.program, a.argv = raw[i+1], raw[i+1:]
	ok := filepath.IsAbs(a.endpoint) && filepath.IsAbs(a.program) &&
		v1alpha1.IsIdentifier(a.key.ConsumerID) && v1alpha1.IsIdentifier(a.key.ConsumerGeneration) &&
		v1alpha1.IsIdentifier(a.key.AttemptID) && v1alpha1.IsIdentifier(a.instance) &&
		a.permitFD > 2 && a.reportFD > 2 && a.permitFD != a.reportFD
	return a, ok
}

func descriptor(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || strconv.Itoa(n) != s {
		return -1
	}
	return n
}

// report writes the helper's transcript, one JSON object per line, each
// line in one write, the whole of it bounded.
type report struct {
	fd      int
	written int
}

func (r *report) line(v map[string]any) {
	for _, k := range []string{"message"} {
		if m, ok := v[k].(string); ok {
			v[k] = bounded(m)
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	b = append(b, '\n')
	if r.written+len(b) > maxTranscript {
		return
	}
	for len(b) > 0 {
		n, err := unix.Write(r.fd, b)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n <= 0 {
			return // the owner may be gone; nothing changes what happens next
		}
		r.written += n
		b = b[n:]
	}
}

// bounded cuts a message to maxMessage bytes, on a character boundary.
func bounded(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	end := maxMessage
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end]
}

func (r *report) failed(stage, message string) int {
	r.line(map[string]any{"phase": "failed", "stage": stage, "message": message})
	return ExitNotAuthorized
}

// Main runs the helper with args (without the program's name) and
// returns its exit status, unless the program was exec'd.
func Main(raw []string) int {
	a, ok := parse(raw)
	if !ok {
		fmt.Fprintln(os.Stderr, "marshal-devguard-launch: invalid invocation; the executable was not started")
		return ExitNotAuthorized
	}
	rep := &report{fd: a.reportFD}
	permit, err := takePermit(a.permitFD)
	// The program must not inherit the transcript.
	if _, cerr := unix.FcntlInt(uintptr(a.reportFD), unix.F_SETFD, unix.FD_CLOEXEC); cerr != nil {
		return rep.failed("report", "cannot protect the report descriptor")
	}
	if err != nil {
		return rep.failed("permit", err.Error())
	}
	if err := leadGroup(); err != nil {
		return rep.failed("scope", err.Error())
	}
	c, err := devguardwire.Dial(a.endpoint, devguardwire.CapFencedLaunch)
	var refused *devguardwire.ErrRefused
	switch {
	case errors.As(err, &refused):
		rep.line(map[string]any{"phase": "refused", "code": refused.Code, "message": "the authority refused the session"})
		return ExitNotAuthorized
	case err != nil:
		return rep.failed("connect", "cannot reach the authority")
	}
	mayExec, err := c.Launch(a.key, a.instance, permit)
	c.Close()
	switch {
	case errors.As(err, &refused):
		rep.line(map[string]any{"phase": "refused", "code": refused.Code, "message": "the authority did not authorize this launch"})
		return ExitNotAuthorized
	case err != nil:
		// A reply that was lost is no authorization: no exec.
		rep.line(map[string]any{"phase": "refused", "code": devguardwire.CodeResourceControlUnavailable, "message": "the authority's answer was lost"})
		return ExitNotAuthorized
	case !mayExec:
		rep.line(map[string]any{"phase": "refused", "code": devguardwire.CodeInvalidTransition, "message": "this launch was already authorized; a replay never execs"})
		return ExitNotAuthorized
	}
	rep.line(map[string]any{"phase": "ready"})
	err = syscall.Exec(a.program, a.argv, os.Environ())
	errno, _ := err.(syscall.Errno)
	rep.line(map[string]any{"phase": "exec_failed", "errno": int(errno)})
	if errno == syscall.ENOENT {
		return ExitNotFound
	}
	return ExitExecFailed
}

// takePermit reads exactly 64 permit bytes from fd, then its end, within
// 250 ms, and closes fd whatever happens.
func takePermit(fd int) (devguardwire.Secret, error) {
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
		return devguardwire.Secret{}, errors.New("invalid, missing or expired private credential descriptor")
	}
	defer unix.Close(fd)
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
		return devguardwire.Secret{}, errors.New("cannot protect the permit descriptor")
	}
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err == nil {
		_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl|unix.O_NONBLOCK)
	}
	if err != nil {
		return devguardwire.Secret{}, errors.New("cannot read the permit descriptor")
	}
	// What is already there is read whatever the time: the deadline
	// bounds only the waits for more.
	deadline := time.Now().Add(permitTimeout)
	buf := make([]byte, permitLen+1)
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			left := time.Until(deadline)
			if left <= 0 {
				return devguardwire.Secret{}, errors.New("the permit did not arrive in time")
			}
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			if _, err := unix.Poll(pfd, int(max(left.Milliseconds(), 1))); err != nil && !errors.Is(err, unix.EINTR) {
				return devguardwire.Secret{}, errors.New("cannot read the permit descriptor")
			}
			continue
		case err != nil:
			return devguardwire.Secret{}, errors.New("cannot read the permit descriptor")
		case m == 0:
			goto done
		}
		n += m
	}
done:
	s, ok := devguardwire.NewSecret(string(buf[:n]))
	if n != permitLen || !ok {
		return devguardwire.Secret{}, errors.New("the permit is not 64 lowercase hex digits")
	}
	return s, nil
}

// leadGroup makes the helper the leader of a process group of its own,
// as devguard-launch's scope root is, unless it leads one already (a
// session leader on a terminal does).
func leadGroup() error {
	if unix.Getpgrp() == os.Getpid() {
		return nil
	}
	if err := unix.Setpgid(0, 0); err != nil {
		return fmt.Errorf("cannot lead a process group: %v", err)
	}
	return nil
}
