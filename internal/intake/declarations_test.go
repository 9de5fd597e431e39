package intake

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/marshal-dev/marshal/api/loader"
	"github.com/marshal-dev/marshal/reconcile"
)

// gone, as a file's content in a step, says the file was removed.
const gone = "\x00gone"

func host(name string) string {
	return fmt.Sprintf("apiVersion: marshal.dev/v1alpha1\nkind: Host\nmetadata:\n  name: %s\n", name)
}

// broken is a Profile that does not load.
func broken(name string) string {
	return strings.Replace(profile(name, 1), "limits:", "limitz:", 1)
}

// declStep is one change to the declarations and what it must give.
type declStep struct {
	files   map[string]string // file → content, or gone
	confirm bool              // confirm an emptying instead
	meant   bool              // an emptying is meant, not held
	// changes told to the sink, as "KIND/NAME FILE:LINE [invalid]
	// [cpu=N] [conflicts=…]", or "-KIND/NAME" for a deletion.
	changes []string
	events  []string // reasons recorded, in order
	held    bool
	// persisted are the files whose last good objects are written, with
	// a "-" before those deleted.
	persisted []string
}

func TestDeclarations(t *testing.T) {
	tests := []struct {
		name  string
		steps []declStep
	}{
		{"first_file_in_path_order_wins", []declStep{
			{files: map[string]string{"b.yaml": profile("x", 2), "a.yaml": profile("x", 1)},
				changes: []string{"Profile/x a.yaml:1 cpu=1 conflicts=b.yaml:1"}, events: []string{"Conflict"},
				persisted: []string{"a.yaml", "b.yaml"}},
			{files: map[string]string{"a.yaml": gone},
				changes: []string{"Profile/x b.yaml:1 cpu=2"}, persisted: []string{"-a.yaml"}},
		}},
		{"one_host", []declStep{
			{files: map[string]string{"h2.yaml": host("two"), "h1.yaml": host("one")},
				changes: []string{"Host/one h1.yaml:1 conflicts=h2.yaml:1"}, events: []string{"Conflict"},
				persisted: []string{"h1.yaml", "h2.yaml"}},
			{files: map[string]string{"h1.yaml": gone},
				changes: []string{"-Host/one", "Host/two h2.yaml:1"}, persisted: []string{"-h1.yaml"}},
		}},
		{"broken_file_keeps_last_good", []declStep{
			{files: map[string]string{"a.yaml": profile("a", 1)},
				changes: []string{"Profile/a a.yaml:1 cpu=1"}, persisted: []string{"a.yaml"}},
			{files: map[string]string{"a.yaml": broken("a")},
				changes: []string{"Profile/a a.yaml:1 invalid cpu=1"}},
			{files: map[string]string{"a.yaml": profile("a", 3)},
				changes: []string{"Profile/a a.yaml:1 cpu=3"}, persisted: []string{"a.yaml"}},
		}},
		{"broken_new_file_declares_nothing", []declStep{
			{files: map[string]string{"keep.yaml": profile("keep", 1), "a.yaml": broken("a")},
				changes: []string{"Profile/keep keep.yaml:1 cpu=1"}, events: []string{"Invalid"}, persisted: []string{"keep.yaml"}},
			// Only a file that declares nothing is reported on the dir
			// when it loads again; objects have their own conditions.
			{files: map[string]string{"a.yaml": "# nothing yet\n"},
				events: []string{"Valid"}, persisted: []string{"a.yaml"}},
		}},
		{"same_content_again_declares_nothing", []declStep{
			{files: map[string]string{"a.yaml": profile("a", 1)},
				changes: []string{"Profile/a a.yaml:1 cpu=1"}, persisted: []string{"a.yaml"}},
			{files: map[string]string{"a.yaml": profile("a", 1)}, persisted: []string{"a.yaml"}},
		}},
		{"emptied_dir_is_held_until_it_comes_back", []declStep{
			{files: map[string]string{"a.yaml": profile("a", 1)},
				changes: []string{"Profile/a a.yaml:1 cpu=1"}, persisted: []string{"a.yaml"}},
			{files: map[string]string{"a.yaml": gone},
				events: []string{"EmptiedHeld"}, held: true, persisted: []string{"-a.yaml"}},
			{files: map[string]string{"b.yaml": profile("b", 1)},
				changes: []string{"-Profile/a", "Profile/b b.yaml:1 cpu=1"}, events: []string{"HoldReleased"}, persisted: []string{"b.yaml"}},
		}},
		{"confirmed_emptying_deletes", []declStep{
			{files: map[string]string{"a.yaml": profile("a", 1), "b.yaml": profile("b", 1)},
				changes: []string{"Profile/a a.yaml:1 cpu=1", "Profile/b b.yaml:1 cpu=1"}, persisted: []string{"a.yaml", "b.yaml"}},
			{files: map[string]string{"a.yaml": gone, "b.yaml": gone},
				events: []string{"EmptiedHeld"}, held: true, persisted: []string{"-a.yaml", "-b.yaml"}},
			{confirm: true, changes: []string{"-Profile/a", "-Profile/b"}, events: []string{"EmptyConfirmed"}},
			{confirm: true},
		}},
		{"meant_emptying_deletes", []declStep{
			{files: map[string]string{"a.yaml": profile("a", 1)},
				changes: []string{"Profile/a a.yaml:1 cpu=1"}, persisted: []string{"a.yaml"}},
			{files: map[string]string{"a.yaml": gone}, meant: true,
				changes: []string{"-Profile/a"}, persisted: []string{"-a.yaml"}},
		}},
		{"one_file_of_several_removed_is_not_held", []declStep{
			{files: map[string]string{"a.yaml": profile("a", 1), "b.yaml": profile("b", 1)},
				changes: []string{"Profile/a a.yaml:1 cpu=1", "Profile/b b.yaml:1 cpu=1"}, persisted: []string{"a.yaml", "b.yaml"}},
			{files: map[string]string{"a.yaml": gone},
				changes: []string{"-Profile/a"}, persisted: []string{"-a.yaml"}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newDeclarations(Origin{Key: reconcile.Key{Kind: "ConfigDir", Name: "manifests.d"}, Name: "config dir /etc/marshal/manifests.d"})
			for i, st := range tc.steps {
				var out outcome
				if st.confirm {
					var released bool
					out, released = d.confirmEmpty()
					if want := len(st.events) > 0; released != want {
						t.Errorf("step %d: confirmEmpty released %v, want %v", i, released, want)
					}
				} else {
					out = d.apply(loadFiles(st.files), !st.meant)
				}
				if got := changeLines(out.changes); !slices.Equal(got, st.changes) {
					t.Errorf("step %d: changes %q, want %q", i, got, st.changes)
				}
				if got := eventReasons(out.events); !slices.Equal(got, st.events) {
					t.Errorf("step %d: events %q, want %q", i, got, st.events)
				}
				if d.held != st.held {
					t.Errorf("step %d: held %v, want %v", i, d.held, st.held)
				}
				if got := persistLines(out.persist); !slices.Equal(got, st.persisted) {
					t.Errorf("step %d: persisted %q, want %q", i, got, st.persisted)
				}
			}
		})
	}
}

// loadFiles loads contents as the loader would read them.
func loadFiles(contents map[string]string) map[string]*unitState {
	changed := map[string]*unitState{}
	for rel, content := range contents {
		if content == gone {
			changed[rel] = nil
			continue
		}
		lf := loader.LoadBytes(rel, []byte(content))
		f := &unitState{errs: lf.Errors}
		if len(lf.Errors) == 0 {
			f.good = lf.Objects
		}
		changed[rel] = f
	}
	return changed
}

func changeLines(changes []Change) []string {
	var out []string
	for _, c := range changes {
		d := c.Declaration
		if d == nil {
			out = append(out, "-"+c.Key.String())
			continue
		}
		line := fmt.Sprintf("%s %s:%d", c.Key, d.File, d.Line)
		if len(d.Invalid) > 0 {
			line += " invalid"
		}
		if c.Key.Kind == "Profile" {
			line += fmt.Sprintf(" cpu=%d", cpuOf(d))
		}
		if len(d.Conflicts) > 0 {
			line += " conflicts=" + strings.Join(d.Conflicts, ",")
		}
		out = append(out, line)
	}
	return out
}

func eventReasons(evs []event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.reason)
	}
	return out
}

func persistLines(persist map[string][]byte) []string {
	var out []string
	for _, rel := range sortedKeys(persist) {
		if persist[rel] == nil {
			rel = "-" + rel
		}
		out = append(out, rel)
	}
	slices.SortFunc(out, func(a, b string) int { return strings.Compare(strings.TrimPrefix(a, "-"), strings.TrimPrefix(b, "-")) })
	return out
}
