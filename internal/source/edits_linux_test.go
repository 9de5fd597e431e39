package source

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/reconcile"
)

// An editor's save is a sequence of system calls; each test below replays
// one with real file operations. The source runs with a quiet period far
// longer than the test, so a file is loaded only on an event the watcher
// takes as complete: a half-written version would be loaded only if it
// took an incomplete one for complete. After each step that leaves a.yaml
// half-written (or missing), a barrier makes sure the source has handled
// the step's events before the next.

// editing is a source on a dir where a.yaml declares Profile a at 100.
type editing struct {
	*harness
	t       *testing.T
	path    string
	barrier int
}

func startEditing(t *testing.T) *editing {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), profile("a", 100))
	write(t, filepath.Join(dir, "marker.yaml"), profile("marker", 1))
	h := startWith(t, dir, nil, func(o *Options, _ *Source) { o.Debounce = time.Hour })
	return &editing{harness: h, t: t, path: filepath.Join(dir, "a.yaml"), barrier: 1}
}

// handled returns once the source has handled every event made so far,
// and fails the test if a.yaml was loaded while half-written: it renames
// a new version of marker.yaml in, a complete event behind them, and
// waits for it to be declared.
func (e *editing) handled() {
	e.t.Helper()
	e.declaredTimes(1)
}

// saved waits for the new version and checks that it was the only one
// declared since the first.
func (e *editing) saved() {
	e.t.Helper()
	e.sink.waitFor(e.t, "a at 150", func() bool { return cpuOf(e.sink.get("Profile", "a")) == 150 })
	e.declaredTimes(2)
}

// declaredTimes waits for a barrier and checks that a was declared n
// times in all.
func (e *editing) declaredTimes(n int) {
	e.t.Helper()
	e.barrier++
	cpu := e.barrier
	writeAtomic(e.t, filepath.Join(e.dir, "marker.yaml"), profile("marker", cpu))
	e.sink.waitFor(e.t, "the marker", func() bool { return cpuOf(e.sink.get("Profile", "marker")) == int64(cpu) })
	e.sink.mu.Lock()
	defer e.sink.mu.Unlock()
	if got := e.sink.history[reconcile.Key{Kind: "Profile", Name: "a"}]; len(got) != n {
		var seen []int64
		for _, c := range got {
			seen = append(seen, cpuOf(c.Declaration))
		}
		e.t.Fatalf("a declared as %v (cpu, -1 deleted); want %d declarations: a half-written or missing a.yaml was loaded", seen, n)
	}
}

// writeInTwo writes the new version of a.yaml to f in two writes, cut
// where the first still loads, as a different object ("cpu_milli: 1"),
// and makes sure the source has seen the first before the second.
func (e *editing) writeInTwo(f *os.File) {
	e.t.Helper()
	full := profile("a", 150)
	cut := strings.Index(full, "cpu_milli: 1") + len("cpu_milli: 1")
	e.write(f, full[:cut])
	e.handled()
	e.write(f, full[cut:])
}

func (e *editing) open(name string, flags int, perm os.FileMode) *os.File {
	e.t.Helper()
	f, err := os.OpenFile(filepath.Join(e.dir, name), flags, perm)
	if err != nil {
		e.t.Fatal(err)
	}
	return f
}

func (e *editing) write(f *os.File, s string) {
	e.t.Helper()
	if _, err := f.WriteString(s); err != nil {
		e.t.Fatal(err)
	}
}

func (e *editing) do(err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
}

// vim with backupcopy=auto on a file it may replace: a probe file 4913 to
// test the directory, the original moved aside as the backup, the new
// version written under the name, the backup removed.
func TestVimSave(t *testing.T) {
	e := startEditing(t)
	probe := e.open("4913", os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	e.do(probe.Chown(os.Getuid(), os.Getgid()))
	e.do(probe.Close())
	e.do(os.Remove(filepath.Join(e.dir, "4913")))
	e.do(os.Rename(e.path, e.path+"~"))
	e.handled()
	f := e.open("a.yaml", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	e.writeInTwo(f)
	e.do(f.Sync())
	e.do(f.Close())
	e.do(os.Chmod(e.path, 0o644))
	e.do(os.Remove(e.path + "~"))
	e.saved()
}

// vim with backupcopy=yes (or on a file with hard links): the original
// copied to the backup, then overwritten in place.
func TestVimSaveInPlace(t *testing.T) {
	e := startEditing(t)
	backup := e.open("a.yaml~", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	e.write(backup, profile("a", 100))
	e.do(backup.Close())
	f := e.open("a.yaml", os.O_WRONLY|os.O_TRUNC, 0)
	e.handled()
	e.writeInTwo(f)
	e.do(f.Sync())
	e.do(f.Close())
	e.do(os.Remove(e.path + "~"))
	e.saved()
}

// VS Code on Linux: the file opened with truncation and written in
// chunks, in place.
func TestVSCodeSave(t *testing.T) {
	e := startEditing(t)
	f := e.open("a.yaml", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
	e.handled()
	e.writeInTwo(f)
	e.do(f.Close())
	e.saved()
}

// sed -i: a temporary file sedXXXXXX in the same directory, written,
// given the original's mode, and renamed over the original.
func TestSedInPlace(t *testing.T) {
	e := startEditing(t)
	tmp := e.open("sedK3xQ9a", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	e.writeInTwo(tmp)
	e.do(tmp.Chmod(0o644))
	e.do(tmp.Close())
	e.handled()
	e.do(os.Rename(filepath.Join(e.dir, "sedK3xQ9a"), e.path))
	e.saved()
}

// cat > a.yaml at a terminal: the shell truncates, cat writes each line
// as it is typed, the shell closes at the end.
func TestCatRedirect(t *testing.T) {
	e := startEditing(t)
	f := e.open("a.yaml", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
	e.handled()
	for line := range strings.Lines(profile("a", 150)) {
		e.write(f, line)
		e.handled()
	}
	e.do(f.Close())
	e.saved()
}

// A file written in place and left open is loaded once it has been quiet
// for the quiet period, as a writer that never closes must be.
func TestOpenWriterIsLoadedWhenQuiet(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.yaml")
	write(t, path, profile("a", 100))
	h := start(t, dir, nil)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString(profile("a", 150))
	h.sink.waitFor(t, "a at 150", func() bool { return cpuOf(h.sink.get("Profile", "a")) == 150 })
}

// An inotify queue that overflows loses events; the relist after it
// finds what they would have told. The source's loop is held in the sink
// while the queue is flooded, and a file created once the queue is full
// is known only to the relist.
func TestQueueOverflowRelists(t *testing.T) {
	max, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events")
	if err != nil {
		t.Skipf("no inotify limits to read: %v", err)
	}
	queue, _ := strconv.Atoi(strings.TrimSpace(string(max)))
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), profile("a", 1))
	h := start(t, dir, nil)

	gate := make(chan struct{})
	h.sink.mu.Lock()
	h.sink.gate = gate
	h.sink.mu.Unlock()
	writeAtomic(t, filepath.Join(dir, "a.yaml"), profile("a", 2)) // held in Declare
	// Enough events to fill the kernel's queue behind what the source
	// has read ahead, alternating files so that none merge.
	noise := [2]*os.File{}
	for i := range noise {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("noise-%d.txt", i)))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		noise[i] = f
	}
	for i := range 2*queue + 16*1024 {
		noise[i%2].Write([]byte{'x'})
	}
	write(t, filepath.Join(dir, "z.yaml"), profile("z", 1))
	h.sink.mu.Lock()
	h.sink.gate = nil
	h.sink.mu.Unlock()
	close(gate)
	h.sink.waitFor(t, "z found by the relist", func() bool { return h.sink.get("Profile", "z") != nil })
}
