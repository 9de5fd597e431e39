//go:build linux

package test

import (
	"testing"
)

// A generation that marshalctl get -w has shown is never shown again for
// another spec, nor followed by a lower one, when marshald is killed
// right after a burst of edits (whose records it writes in the
// background) and started again; after a clean stop the count goes on
// exactly.
func TestGenerationsAfterAKill(t *testing.T) {
	d := newDaemon(t)
	d.write("coder.yaml", profileYAML("coder", 1000))
	d.start()
	profiles := d.watch("profiles")
	profiles.until(t, "coder", "at generation 1", generationIs(1))
	seen := 1.0
	for i := range 20 {
		d.write("coder.yaml", profileYAML("coder", 1001+i%2))
		seen++
		profiles.until(t, "coder", "the edit", generationIs(seen))
	}
	d.cmd.Process.Kill()
	<-d.exited

	// The first spec again: it may not take a generation it had.
	d.write("coder.yaml", profileYAML("coder", 1000))
	d.start()
	profiles = d.watch("profiles")
	var after float64
	profiles.until(t, "coder", "declared after the kill", func(o map[string]any) bool {
		after, _ = field(o, "metadata", "generation").(float64)
		return after != 0
	})
	if after <= seen {
		t.Fatalf("after a kill at generation %v shown, the profile is at %v", seen, after)
	}
	profiles.until(t, "coder", "observed after the kill", generationIs(after))
	d.stop()

	d.start()
	profiles = d.watch("profiles")
	profiles.until(t, "coder", "the same generation after a clean stop", generationIs(after))
	d.write("coder.yaml", profileYAML("coder", 1001))
	profiles.until(t, "coder", "the next generation after a clean stop", generationIs(after+1))
}
