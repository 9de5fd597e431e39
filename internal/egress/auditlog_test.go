package egress

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/internal/testutil"
)

func readAllLines(t *testing.T, l *Log) []string {
	t.Helper()
	var lines []string
	if err := l.Read(t.Context(), false, func(b []byte) error {
		lines = append(lines, string(b))
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	return lines
}

func hostsOf(t *testing.T, lines []string) string {
	t.Helper()
	var hosts []string
	for _, line := range lines {
		var r Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		hosts = append(hosts, r.Host)
	}
	return strings.Join(hosts, " ")
}

func TestLogRotatesBySizeAndReadsOldestFirst(t *testing.T) {
	dir := t.TempDir()
	l, err := OpenLog(dir, LogOptions{MaxBytes: 600, Keep: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var want []string
	for i := range 12 {
		h := fmt.Sprintf("h%02d.test", i)
		l.Audit(&Record{Time: time.Unix(int64(i), 0).UTC(), Host: h, Port: 443, Verdict: VerdictAllow, Transport: TransportTCP, Protocol: ProtocolConnect})
		want = append(want, h)
	}
	for _, name := range []string{LogFile, LogFile + ".1", LogFile + ".2"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if fi.Size() > 600 || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %d bytes, mode %v; want at most 600, 0600", name, fi.Size(), fi.Mode().Perm())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, LogFile+".3")); err == nil {
		t.Error("a fourth file was kept; keep is 2")
	}
	got := hostsOf(t, readAllLines(t, l))
	// The oldest were rotated away: what is kept is the newest, in order.
	if !strings.HasSuffix(strings.Join(want, " "), got) || !strings.HasSuffix(got, "h11.test") || len(got) < 3*8 {
		t.Errorf("read %q; want the newest records, oldest first", got)
	}

	// Reopened, it appends.
	l.Close()
	l2, err := OpenLog(dir, LogOptions{MaxBytes: 600, Keep: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	l2.Audit(&Record{Host: "after.test", Verdict: VerdictDeny})
	if got := hostsOf(t, readAllLines(t, l2)); !strings.HasSuffix(got, "h11.test after.test") {
		t.Errorf("after reopening: %q", got)
	}
}

func TestLogFollowSeesNewLinesAcrossRotations(t *testing.T) {
	l, err := OpenLog(t.TempDir(), LogOptions{MaxBytes: 300, Keep: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Audit(&Record{Host: "before.test"})
	ctx, cancel := context.WithCancel(t.Context())
	lines := make(chan string, 100)
	done := make(chan error, 1)
	caughtUp := make(chan struct{})
	go func() {
		done <- l.Read(ctx, true, func(b []byte) error {
			lines <- string(b)
			return nil
		}, func() error {
			close(caughtUp)
			return nil
		})
	}()
	next := func() string {
		select {
		case s := <-lines:
			return hostsOf(t, []string{s})
		case <-time.After(testutil.Deadline):
			t.Fatal("no line")
			return ""
		}
	}
	if h := next(); h != "before.test" {
		t.Fatalf("first line %q", h)
	}
	select {
	case <-caughtUp:
	case <-time.After(testutil.Deadline):
		t.Fatal("Read did not say it caught up")
	}
	for i := range 6 { // each ~120 bytes: rotated twice on the way
		h := fmt.Sprintf("new%d.test", i)
		l.Audit(&Record{Host: h})
		if got := next(); got != h {
			t.Fatalf("followed %q, want %q", got, h)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Read = %v", err)
	}
}
