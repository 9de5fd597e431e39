//go:build linux

package test

import (
	"path/filepath"
	"testing"

	"github.com/marshal-dev/marshal/api/loader"
)

// TestExampleManifestsAreReady runs marshald on manifests/ as `make run`
// does, and wants every example Workspace and Profile Ready: a newcomer's
// first `get workspaces` after a fresh clone shows nothing to fix. A
// root that exists only on the author's machine fails it.
func TestExampleManifestsAreReady(t *testing.T) {
	dir, err := filepath.Abs("../manifests")
	if err != nil {
		t.Fatal(err)
	}
	res, err := loader.LoadDir(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Errors) > 0 {
		t.Fatalf("the examples do not load: %v", res.Errors)
	}
	names := map[string][]string{}
	for _, o := range res.Objects {
		kind := o.GetTypeMeta().Kind
		names[kind] = append(names[kind], o.GetObjectMeta().Name)
	}
	if len(names["Workspace"]) == 0 || len(names["Profile"]) == 0 {
		t.Fatalf("manifests/ declares %v; the test expects example Workspaces and Profiles", names)
	}
	d := newDaemon(t)
	d.config = dir
	// The proxy on an address of its own: the examples' egress profile
	// needs one, and the default is one per uid.
	d.start("--egress-address", "127.0.0.1:0")
	for kind, list := range map[string]string{"Workspace": "workspaces", "Profile": "profiles"} {
		w := d.watch(list)
		for _, name := range names[kind] {
			w.until(t, name, "Ready", func(o map[string]any) bool { return conditionIs(o, "Ready", "True") })
		}
		w.stop()
	}
}
