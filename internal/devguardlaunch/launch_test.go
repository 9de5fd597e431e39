package devguardlaunch

import (
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

func TestParseTakesDevGuardsArguments(t *testing.T) {
	good := []string{"--endpoint", "/run/dg.sock", "--consumer", "codespace", "--generation", "g1", "--attempt", "a-1",
		"--instance", "codespace-1", "--permit-fd", "3", "--report-fd", "4", "--", "/bin/sh", "-c", "true"}
	a, ok := parse(good)
	if !ok || a.endpoint != "/run/dg.sock" || a.key.AttemptID != "a-1" || a.instance != "codespace-1" ||
		a.permitFD != 3 || a.reportFD != 4 || a.program != "/bin/sh" || strings.Join(a.argv, " ") != "/bin/sh -c true" {
		t.Fatalf("parse = %+v, %v", a, ok)
	}
	if _, ok := parse(append([]string{"--stage", "clamped"}, good...)); !ok {
		t.Error("--stage clamped, which DevGuard's macOS helper adds, was refused")
	}
	with := func(i int, v string) []string {
		out := append([]string(nil), good...)
		out[i] = v
		return out
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"relative_endpoint", with(1, "dg.sock")},
		{"relative_program", with(15, "sh")},
		{"bad_consumer", with(3, "code space")},
		{"permit_fd_2", with(11, "2")},
		{"same_fds", with(13, "3")},
		{"fd_not_a_number", with(11, "x")},
		{"fd_with_sign", with(11, "+3")},
		{"unknown_option", with(0, "--socket")},
		{"other_stage", append([]string{"--stage", "raw"}, good...)},
		{"repeated_option", append([]string{"--attempt", "a-2"}, good...)},
		{"no_program", good[:15]},
		{"no_separator", append(good[:14:14], "/bin/true")},
	} {
		if _, ok := parse(tc.args); ok {
			t.Errorf("%s: parse(%q) accepted", tc.name, tc.args)
		}
	}
}

func TestBoundedCutsOnACharacter(t *testing.T) {
	s := strings.Repeat("é", 200)
	b := bounded(s)
	if len(b) > maxMessage || !utf8.ValidString(b) || !strings.HasPrefix(s, b) {
		t.Errorf("bounded = %d bytes, valid %v", len(b), utf8.ValidString(b))
	}
	if bounded("short") != "short" {
		t.Error("a short message was cut")
	}
}

// carrier is a descriptor holding data and then its end, as the owner's
// permit carrier does; end false leaves the writer open.
func carrier(t *testing.T, data string, end bool) int {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Write(fds[1], []byte(data)); err != nil {
		t.Fatal(err)
	}
	if end {
		unix.Close(fds[1])
	} else {
		t.Cleanup(func() { unix.Close(fds[1]) })
	}
	return fds[0]
}

func TestTakePermitReadsExactly64Bytes(t *testing.T) {
	permit := strings.Repeat("ab", 32)
	fd := carrier(t, permit, true)
	s, err := takePermit(fd)
	if err != nil || s.Expose() != permit {
		t.Fatalf("takePermit = %v", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil {
		t.Error("the permit descriptor was left open")
	}
	for _, tc := range []struct {
		name string
		data string
		end  bool
	}{
		{"short", permit[:63], true},
		{"long", permit + "0", true},
		{"not_hex", strings.Repeat("Z", 64), true},
		{"never_ends", permit, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := takePermit(carrier(t, tc.data, tc.end)); err == nil {
				t.Error("accepted")
			}
		})
	}
	if _, err := takePermit(1 << 20); err == nil {
		t.Error("a descriptor that is not open was accepted")
	}
}
