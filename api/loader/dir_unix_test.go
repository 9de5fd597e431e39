//go:build unix

package loader

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"
)

// TestLoadDirFIFO checks that a FIFO with a manifest's name is reported,
// not opened for a read that would wait for a writer forever.
func TestLoadDirFIFO(t *testing.T) {
	conf := t.TempDir()
	writeFile(t, filepath.Join(conf, "good.yaml"), profileYAML("good"))
	fifo := filepath.Join(conf, "pipe.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := LoadDir(t.Context(), conf)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Objects) != 1 || len(r.Errors) != 1 {
		t.Fatalf("LoadDir = %d objects, errors %v; want 1 object and 1 error", len(r.Objects), r.Errors)
	}
	if e := r.Errors[0]; e.File != fifo || !errors.Is(e, ErrRead) {
		t.Errorf("error = %v (%s), want ErrRead on %s", e, e.File, fifo)
	}
	if f := LoadFile(fifo); len(f.Errors) != 1 || !errors.Is(f.Errors[0], ErrRead) {
		t.Errorf("LoadFile(fifo) errors = %v, want one ErrRead", f.Errors)
	}
}
