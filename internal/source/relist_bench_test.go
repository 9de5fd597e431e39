package source

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkIdleRelist measures the periodic relist of a config dir of
// 10,000 files where nothing changed: a walk and a stat per file, nothing
// loaded.
func BenchmarkIdleRelist(b *testing.B) {
	dir := b.TempDir()
	for i := range 10000 {
		sub := filepath.Join(dir, fmt.Sprintf("team-%02d", i%50))
		os.MkdirAll(sub, 0o755)
		os.WriteFile(filepath.Join(sub, fmt.Sprintf("p-%05d.yaml", i)), []byte(profile(fmt.Sprintf("p-%05d", i), 100)), 0o644)
	}
	sink := newRecorder()
	s := New(Options{Dir: dir, Sink: sink, Relist: -1})
	s.flush(b.Context(), batch{relist: true})
	b.ResetTimer()
	for range b.N {
		s.flush(b.Context(), batch{relist: true})
	}
	if sink.batches != 1 {
		b.Fatalf("an idle relist declared something: %d batches", sink.batches)
	}
}
