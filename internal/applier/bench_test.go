package applier

import (
	"testing"

	"github.com/marshal-dev/marshal/internal/localapi"
)

// BenchmarkApply applies one object to a config dir: configured (two
// versions in turn: validate, compare, atomic write with two fsyncs), or
// unchanged (validate and compare only).
func BenchmarkApply(b *testing.B) {
	tests := []struct {
		name     string
		versions []string
	}{
		{name: "configured", versions: []string{coder, coderMoreCPU}},
		{name: "unchanged", versions: []string{coder}},
	}
	for _, tc := range tests {
		b.Run(tc.name, func(b *testing.B) {
			dir := b.TempDir()
			decl, err := Scan(b.Context(), dir)
			if err != nil {
				b.Fatal(err)
			}
			i := 0
			for b.Loop() {
				req := localapi.ApplyRequest{Files: []localapi.ApplyFile{file("coder.yaml", tc.versions[i%len(tc.versions)])}}
				i++
				if _, err := Apply(b.Context(), dir, decl, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
