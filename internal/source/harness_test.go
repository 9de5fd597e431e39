package source

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/events"
	"github.com/marshal-dev/marshal/internal/intake"
	"github.com/marshal-dev/marshal/internal/state"
	"github.com/marshal-dev/marshal/internal/testutil"
	"github.com/marshal-dev/marshal/reconcile"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is the sink of the tests: it keeps what was declared and wakes
// waiters on every batch.
type recorder struct {
	mu      sync.Mutex
	decl    map[reconcile.Key]*intake.Declaration
	history map[reconcile.Key][]intake.Change // every change of each key, in order
	batches int
	wake    chan struct{}
	// gate, when set, holds every Declare until it is closed.
	gate chan struct{}
}

func newRecorder() *recorder {
	return &recorder{decl: map[reconcile.Key]*intake.Declaration{}, history: map[reconcile.Key][]intake.Change{}, wake: make(chan struct{}, 1000)}
}

func (r *recorder) Declare(changes []intake.Change) {
	r.mu.Lock()
	gate := r.gate
	r.mu.Unlock()
	if gate != nil {
		<-gate
	}
	r.mu.Lock()
	for _, c := range changes {
		if c.Declaration == nil {
			delete(r.decl, c.Key)
		} else {
			r.decl[c.Key] = c.Declaration
		}
		r.history[c.Key] = append(r.history[c.Key], c)
	}
	r.batches++
	r.mu.Unlock()
	r.wake <- struct{}{}
}

func (r *recorder) get(kind, name string) *intake.Declaration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.decl[reconcile.Key{Kind: kind, Name: name}]
}

func (r *recorder) names() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for k := range r.decl {
		out = append(out, k.String())
	}
	return fmt.Sprint(sorted(out))
}

func sorted(s []string) []string {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s
}

// waitFor waits until cond holds, waking on every declaration batch.
func (r *recorder) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, r.wake, cond, what)
}

func profile(name string, cpu int) string {
	return fmt.Sprintf("apiVersion: marshal.dev/v1alpha1\nkind: Profile\nmetadata:\n  name: %s\nspec:\n  limits:\n    cpu_milli: %d\n", name, cpu)
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeAtomic saves as editors and kubectl do: a temp file renamed over.
func writeAtomic(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	write(t, tmp, content)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func cpuOf(d *intake.Declaration) int64 {
	if d == nil {
		return -1
	}
	p := d.Object.(*v1alpha1.Profile)
	if p.Spec.Limits == nil || p.Spec.Limits.CPUMilli == nil {
		return 0
	}
	return *p.Spec.Limits.CPUMilli
}

type harness struct {
	// flushed wakes after the source's loop handled anything, declared
	// or not.
	flushed chan struct{}
	dir     string
	sink    *recorder
	src     *Source
	db      *state.DB
	rec     *events.Recorder
	stop    func()

	mu       sync.Mutex
	settling []string // as of the loop's last turn
}

// isSettling reports whether, at the loop's last turn, rel was emptied in
// place and given time to be written again.
func (h *harness) isSettling(rel string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Contains(h.settling, rel)
}

// start runs a Source on dir with a fresh or given state database.
func start(t *testing.T, dir string, db *state.DB) *harness {
	t.Helper()
	return startWith(t, dir, db, nil)
}

// startWith is start with a hook to adjust the options and the source
// before it starts.
func startWith(t *testing.T, dir string, db *state.DB, adjust func(*Options, *Source)) *harness {
	t.Helper()
	if db == nil {
		var err error
		db, err = state.Open(filepath.Join(t.TempDir(), "state.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
	}
	rec, _ := events.New(events.Options{})
	h := &harness{dir: dir, sink: newRecorder(), db: db, rec: rec}
	opts := Options{Dir: dir, Sink: h.sink, Store: db, Recorder: rec, Relist: -1}
	h.src = New(opts)
	h.flushed = make(chan struct{}, 1)
	h.src.afterLoop = func(settling []string) {
		h.mu.Lock()
		h.settling = settling
		h.mu.Unlock()
		select {
		case h.flushed <- struct{}{}:
		default:
		}
	}
	if adjust != nil {
		adjust(&h.src.opts, h.src)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- h.src.Start(ctx) }()
	h.stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	}
	t.Cleanup(func() {
		if ctx.Err() == nil {
			h.stop()
		}
	})
	select {
	case <-h.src.Synced():
	case err := <-done:
		t.Fatalf("Start returned before sync: %v", err)
	case <-time.After(testutil.Deadline):
		t.Fatal("no initial sync")
	}
	return h
}

// waitStatus waits until cond holds of the source's status, waking on
// every flush.
func (h *harness) waitStatus(t *testing.T, what string, cond func(intake.Status) bool) {
	t.Helper()
	testutil.Eventually(t, h.flushed, func() bool { return cond(h.src.Status()) }, what)
}

func (h *harness) hasEvent(reason string) bool {
	evs, _ := h.rec.List(reconcile.Key{}, 0)
	for _, e := range evs {
		if e.Reason == reason {
			return true
		}
	}
	return false
}
