package source

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marshal-dev/marshal/internal/intake"
	"github.com/marshal-dev/marshal/internal/state"
	"github.com/marshal-dev/marshal/internal/testutil"
)

func TestInitialLoadAndEdits(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), profile("a", 100))
	write(t, filepath.Join(dir, "sub", "b.yml"), profile("b", 200))
	write(t, filepath.Join(dir, ".hidden.yaml"), profile("hidden", 1))
	write(t, filepath.Join(dir, "a.yaml~"), profile("backup", 1))
	h := start(t, dir, nil)
	if got := h.sink.names(); got != "[Profile/a Profile/b]" {
		t.Fatalf("declared %s, want Profile/a and Profile/b only", got)
	}

	t.Run("edit_in_place", func(t *testing.T) {
		write(t, filepath.Join(dir, "a.yaml"), profile("a", 150))
		h.sink.waitFor(t, "a at 150", func() bool { return cpuOf(h.sink.get("Profile", "a")) == 150 })
	})
	t.Run("atomic_rename_over", func(t *testing.T) {
		writeAtomic(t, filepath.Join(dir, "a.yaml"), profile("a", 175))
		h.sink.waitFor(t, "a at 175", func() bool { return cpuOf(h.sink.get("Profile", "a")) == 175 })
	})
	t.Run("break_keeps_last_good", func(t *testing.T) {
		write(t, filepath.Join(dir, "a.yaml"), strings.Replace(profile("a", 300), "limits:", "limitz:", 1))
		h.sink.waitFor(t, "a invalid", func() bool {
			d := h.sink.get("Profile", "a")
			return d != nil && len(d.Invalid) > 0
		})
		d := h.sink.get("Profile", "a")
		if cpuOf(d) != 175 {
			t.Errorf("broken file replaced the last good version: cpu %d, want 175", cpuOf(d))
		}
		if msg := d.Invalid[0].Error(); !strings.Contains(msg, "a.yaml:6") || !strings.Contains(msg, "spec.limitz") {
			t.Errorf("Invalid = %q, want file a.yaml, line 6 and field spec.limitz", msg)
		}
	})
	t.Run("fix_clears_invalid", func(t *testing.T) {
		write(t, filepath.Join(dir, "a.yaml"), profile("a", 300))
		h.sink.waitFor(t, "a fixed", func() bool {
			d := h.sink.get("Profile", "a")
			return cpuOf(d) == 300 && len(d.Invalid) == 0
		})
	})
	t.Run("delete_file", func(t *testing.T) {
		os.Remove(filepath.Join(dir, "sub", "b.yml"))
		h.sink.waitFor(t, "b deleted", func() bool { return h.sink.get("Profile", "b") == nil })
	})
	t.Run("new_subdirectory", func(t *testing.T) {
		write(t, filepath.Join(dir, "new", "deeper", "c.yaml"), profile("c", 1))
		h.sink.waitFor(t, "c declared", func() bool { return h.sink.get("Profile", "c") != nil })
	})
}

func TestTruncateThenWriteDoesNotDelete(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.yaml")
	write(t, path, profile("a", 100))
	write(t, filepath.Join(dir, "keep.yaml"), profile("keep", 1))
	h := startWith(t, dir, nil, func(o *Options, s *Source) {
		o.Settle = testutil.Deadline // only the write below may end the settling
	})

	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	h.sink.mu.Lock()
	before := h.sink.batches
	h.sink.mu.Unlock()
	// The truncation is seen on its own before the content arrives.
	testutil.Eventually(t, h.flushed, func() bool { return h.isSettling("a.yaml") }, "the emptied file to be seen")
	f.WriteString(profile("a", 200))
	f.Close()
	h.sink.waitFor(t, "a at 200", func() bool { return cpuOf(h.sink.get("Profile", "a")) == 200 })
	h.sink.mu.Lock()
	defer h.sink.mu.Unlock()
	if h.sink.batches != before+1 {
		t.Errorf("%d declaration batches after the truncate, want only the new content", h.sink.batches-before)
	}
}

func TestFileLeftEmptyIsBelievedAfterSettle(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.yaml")
	write(t, path, profile("a", 100))
	write(t, filepath.Join(dir, "keep.yaml"), profile("keep", 1))
	h := start(t, dir, nil)
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	h.sink.waitFor(t, "a deleted", func() bool { return h.sink.get("Profile", "a") == nil })
	if h.sink.get("Profile", "keep") == nil {
		t.Error("keep was deleted with a")
	}
}

func TestEmptiedDirIsHeld(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "manifests.d")
	write(t, filepath.Join(dir, "a.yaml"), profile("a", 100))
	h := start(t, dir, nil)

	t.Run("last_file_deleted", func(t *testing.T) {
		os.Remove(filepath.Join(dir, "a.yaml"))
		h.waitStatus(t, "hold", func(st intake.Status) bool { return st.Held })
		if h.sink.get("Profile", "a") == nil {
			t.Fatal("the emptied dir deleted its object")
		}
		if !h.hasEvent("EmptiedHeld") {
			t.Error("no EmptiedHeld warning")
		}
	})
	t.Run("comes_back", func(t *testing.T) {
		write(t, filepath.Join(dir, "b.yaml"), profile("b", 1))
		h.sink.waitFor(t, "release", func() bool { return h.sink.get("Profile", "b") != nil && h.sink.get("Profile", "a") == nil })
		if h.src.Status().Held {
			t.Error("still held")
		}
	})
	t.Run("dir_removed_and_recreated", func(t *testing.T) {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		h.waitStatus(t, "missing", func(st intake.Status) bool { return st.Missing && st.Held })
		if h.sink.get("Profile", "b") == nil {
			t.Fatal("a vanished dir deleted its object")
		}
		write(t, filepath.Join(dir, "b.yaml"), profile("b", 2))
		h.sink.waitFor(t, "back", func() bool { return cpuOf(h.sink.get("Profile", "b")) == 2 && !h.src.Status().Held })
	})
	t.Run("confirmed", func(t *testing.T) {
		os.Remove(filepath.Join(dir, "b.yaml"))
		h.waitStatus(t, "hold", func(st intake.Status) bool { return st.Held })
		released, err := h.src.ConfirmEmpty(t.Context())
		if err != nil || !released {
			t.Fatalf("ConfirmEmpty = %v, %v; want a released hold", released, err)
		}
		h.sink.waitFor(t, "deleted", func() bool { return h.sink.get("Profile", "b") == nil })
		if again, _ := h.src.ConfirmEmpty(t.Context()); again {
			t.Error("a second ConfirmEmpty released a hold again")
		}
	})
}

func TestSymlinkSwapOfTheWholeTree(t *testing.T) {
	parent := t.TempDir()
	write(t, filepath.Join(parent, "rev1", "a.yaml"), profile("a", 1))
	write(t, filepath.Join(parent, "rev2", "a.yaml"), profile("a", 2))
	write(t, filepath.Join(parent, "rev2", "b.yaml"), profile("b", 2))
	link := filepath.Join(parent, "current")
	if err := os.Symlink("rev1", link); err != nil {
		t.Fatal(err)
	}
	h := start(t, link, nil)
	if cpuOf(h.sink.get("Profile", "a")) != 1 {
		t.Fatal("rev1 not loaded")
	}
	// As git and ConfigMaps do: a new link renamed over the old one.
	tmp := filepath.Join(parent, ".current.tmp")
	os.Symlink("rev2", tmp)
	if err := os.Rename(tmp, link); err != nil {
		t.Fatal(err)
	}
	h.sink.waitFor(t, "rev2", func() bool {
		return cpuOf(h.sink.get("Profile", "a")) == 2 && h.sink.get("Profile", "b") != nil
	})
	// Edits in the new tree are watched.
	write(t, filepath.Join(parent, "rev2", "b.yaml"), profile("b", 3))
	h.sink.waitFor(t, "b edited", func() bool { return cpuOf(h.sink.get("Profile", "b")) == 3 })
	// And edits in the old one are not.
	write(t, filepath.Join(parent, "rev1", "z.yaml"), profile("z", 1))
	write(t, filepath.Join(parent, "rev2", "b.yaml"), profile("b", 4))
	h.sink.waitFor(t, "b edited again", func() bool { return cpuOf(h.sink.get("Profile", "b")) == 4 })
	if h.sink.get("Profile", "z") != nil {
		t.Error("a file in the swapped-out tree was loaded")
	}
}

func TestConfigMapDataSwap(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "..2024_01", "a.yaml"), profile("a", 1))
	os.Symlink("..2024_01", filepath.Join(dir, "..data"))
	os.Symlink("..data/a.yaml", filepath.Join(dir, "a.yaml"))
	h := start(t, dir, nil)
	if cpuOf(h.sink.get("Profile", "a")) != 1 {
		t.Fatal("ConfigMap layout not loaded")
	}
	write(t, filepath.Join(dir, "..2024_02", "a.yaml"), profile("a", 2))
	os.Symlink("..2024_02", filepath.Join(dir, "..data_tmp"))
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(dir, "..2024_01"))
	h.sink.waitFor(t, "new data", func() bool { return cpuOf(h.sink.get("Profile", "a")) == 2 })
}

func TestRestartKeepsLastGood(t *testing.T) {
	dir := t.TempDir()
	db, err := state.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	write(t, filepath.Join(dir, "a.yaml"), profile("a", 100))
	h := start(t, dir, db)
	h.stop()

	// Broken while the daemon was down.
	write(t, filepath.Join(dir, "a.yaml"), "kind: Profile\nmetadata: {name: a}\nspec: [\n")
	h2 := start(t, dir, db)
	d := h2.sink.get("Profile", "a")
	if cpuOf(d) != 100 || len(d.Invalid) == 0 {
		t.Fatalf("after restart a = %+v, want the last good version (cpu 100) marked Invalid", d)
	}
	h2.stop()

	// And the whole dir gone while down: held, nothing deleted.
	os.RemoveAll(dir)
	h3 := start(t, dir, db)
	if cpuOf(h3.sink.get("Profile", "a")) != 100 || !h3.src.Status().Held {
		t.Fatalf("after restart with the dir gone: a = %+v, held %v; want kept and held", h3.sink.get("Profile", "a"), h3.src.Status().Held)
	}
}

func TestConflictsAndTheHostSingleton(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), profile("x", 1))
	write(t, filepath.Join(dir, "b.yaml"), profile("x", 2))
	write(t, filepath.Join(dir, "h1.yaml"), "apiVersion: marshal.dev/v1alpha1\nkind: Host\nmetadata: {name: one}\n")
	write(t, filepath.Join(dir, "h2.yaml"), "apiVersion: marshal.dev/v1alpha1\nkind: Host\nmetadata: {name: two}\n")
	h := start(t, dir, nil)
	d := h.sink.get("Profile", "x")
	if cpuOf(d) != 1 || len(d.Conflicts) != 1 || d.Conflicts[0] != "b.yaml:1" {
		t.Fatalf("x = %+v, want a.yaml's version with a conflict at b.yaml:1", d)
	}
	if h.sink.get("Host", "two") != nil || h.sink.get("Host", "one") == nil {
		t.Fatalf("hosts declared: %s, want only one", h.sink.names())
	}
	os.Remove(filepath.Join(dir, "a.yaml"))
	h.sink.waitFor(t, "b wins", func() bool {
		d := h.sink.get("Profile", "x")
		return cpuOf(d) == 2 && len(d.Conflicts) == 0
	})
	os.Remove(filepath.Join(dir, "h1.yaml"))
	h.sink.waitFor(t, "host two", func() bool { return h.sink.get("Host", "two") != nil && h.sink.get("Host", "one") == nil })
}

func TestRelistCatchesWhatEventsMissed(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), profile("a", 1))
	sink := newRecorder()
	s := New(Options{Dir: dir, Sink: sink, Relist: -1})
	// No watcher: only the relist can see the change.
	s.flush(t.Context(), batch{relist: true})
	write(t, filepath.Join(dir, "a.yaml"), profile("a", 22))
	s.flush(t.Context(), batch{relist: true})
	if cpuOf(sink.get("Profile", "a")) != 22 {
		t.Fatalf("relist missed the change: %+v", sink.get("Profile", "a"))
	}
	// A relist with nothing changed declares nothing.
	n := sink.batches
	s.flush(t.Context(), batch{relist: true})
	if sink.batches != n {
		t.Error("an idle relist declared something")
	}
}
