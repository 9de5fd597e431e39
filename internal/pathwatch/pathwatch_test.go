package pathwatch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/marshal-dev/marshal/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type notes struct {
	mu   sync.Mutex
	got  map[string]int
	wake chan struct{}
}

func (n *notes) add(owner string) {
	n.mu.Lock()
	n.got[owner]++
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *notes) count(owner string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.got[owner]
}

func start(t *testing.T) (*Watcher, *notes) {
	t.Helper()
	n := &notes{got: map[string]int{}, wake: make(chan struct{}, 1)}
	w, err := New(n.add, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return w, n
}

// waitMore waits until owner has been notified more than before.
func waitMore(t *testing.T, n *notes, owner string, before int, what string) int {
	t.Helper()
	testutil.Eventually(t, n.wake, func() bool { return n.count(owner) > before }, what)
	return n.count(owner)
}

func TestRootLifecycle(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "src", "webapp")
	w, n := start(t)
	w.Set("ws/webapp", root)
	if got := w.Watched(); !slices.Equal(got, []string{base}) {
		t.Fatalf("watching %v, want the nearest existing directory %s", got, base)
	}
	c := 0
	steps := []struct {
		what string
		do   func() error
	}{
		{"parent created", func() error { return os.Mkdir(filepath.Join(base, "src"), 0o755) }},
		{"root created", func() error { return os.Mkdir(root, 0o755) }},
		{"root made unreadable", func() error { return os.Chmod(root, 0) }},
		{"root removed", func() error { return os.Remove(root) }},
		{"root created as a file", func() error { return os.WriteFile(root, nil, 0o644) }},
		{"root removed again", func() error { return os.Remove(root) }},
		{"parent removed", func() error { return os.Remove(filepath.Join(base, "src")) }},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatal(err)
		}
		c = waitMore(t, n, "ws/webapp", c, s.what)
	}
	if got := w.Watched(); !slices.Equal(got, []string{base}) {
		t.Errorf("after the parent went, watching %v, want %s again", got, base)
	}
}

func TestSharedDirectoriesAndUnset(t *testing.T) {
	base := t.TempDir()
	w, n := start(t)
	for i := range 100 {
		w.Set(fmt.Sprintf("ws/%d", i), filepath.Join(base, fmt.Sprint(i)))
	}
	if got := w.Watched(); len(got) != 1 {
		t.Fatalf("100 roots in one directory use %d watches, want 1", len(got))
	}
	os.Mkdir(filepath.Join(base, "42"), 0o755)
	waitMore(t, n, "ws/42", 0, "root 42 created")
	if n.count("ws/41") != 0 {
		t.Error("an unrelated root was notified")
	}
	for i := range 100 {
		w.Set(fmt.Sprintf("ws/%d", i), "")
	}
	if got := w.Watched(); len(got) != 0 {
		t.Errorf("after every owner left, watching %v", got)
	}
}

func TestMovedPath(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	w, n := start(t)
	w.Set("ws/x", filepath.Join(a, "root"))
	w.Set("ws/x", filepath.Join(b, "root"))
	if got := w.Watched(); !slices.Equal(got, []string{b}) {
		t.Fatalf("watching %v, want only %s", got, b)
	}
	os.Mkdir(filepath.Join(b, "root"), 0o755)
	waitMore(t, n, "ws/x", 0, "the new root created")
}

// A watcher that is never started releases its inotify instance, and
// its goroutine, on Close; a Start after Close ends at once.
func TestCloseWithoutStart(t *testing.T) {
	w, err := New(func(string) {}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Set("ws", filepath.Join(t.TempDir(), "root"))
	if err := w.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("a second Close = %v, want nil", err)
	}
	if err := w.Start(t.Context()); err == nil {
		t.Error("Start after Close = nil, want an error")
	}
	goleak.VerifyNone(t)
}
