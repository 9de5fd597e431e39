package source

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/utils/clock"
)

// TestWatcherTakesEvents shows which events the watcher acts on at once,
// which wait for the quiet period, which ask for a relist and which it
// ignores. Files named by a case exist as it says, for the lstat of names
// that are not manifests.
func TestWatcherTakesEvents(t *testing.T) {
	type ev struct {
		name string // inside the root; "/" first: inside the config dir's parent
		op   op
	}
	tests := []struct {
		name   string
		files  map[string]string // name → "file", "dir" or a symlink's target
		events []ev
		want   []string
	}{
		{"renamed_into_place", nil, []ev{{"a.yaml", opMovedIn}}, []string{"now a.yaml"}},
		{"writer_closed", nil, []ev{{"a.yaml", opWrite}, {"a.yaml", opCloseWrite}}, []string{"now a.yaml"}},
		{"written_in_place", nil, []ev{{"a.yaml", opWrite}}, []string{"later a.yaml"}},
		{"created", nil, []ev{{"a.yaml", opCreate}}, []string{"later a.yaml"}},
		{"removed", nil, []ev{{"a.yaml", opRemove}}, []string{"later a.yaml"}},
		{"moved_aside", nil, []ev{{"a.yaml", opMovedOut}}, []string{"later a.yaml"}},
		{"written_again_after_close", nil, []ev{{"a.yaml", opCloseWrite}, {"a.yaml", opWrite}}, []string{"later a.yaml"}},
		{"mode_set_after_close", nil, []ev{{"a.yaml", opCloseWrite}, {"a.yaml", opChmod}}, []string{"now a.yaml"}},
		{"configmap_data_swapped", map[string]string{"..data": "..2024_01"}, []ev{{"..data", opMovedIn}}, []string{"relist now"}},
		{"dot_temporary_renamed_away", map[string]string{".a.yaml.tmp": "file"},
			[]ev{{".a.yaml.tmp", opCreate}, {".a.yaml.tmp", opCloseWrite}, {".a.yaml.tmp", opMovedOut}}, nil},
		{"vim_probe", map[string]string{"4913": "file"}, []ev{{"4913", opCreate}, {"4913", opRemove}}, nil},
		{"vim_probe_already_gone", nil, []ev{{"4913", opCreate}, {"4913", opRemove}}, nil},
		{"backup_moved_in", map[string]string{"a.yaml~": "file"}, []ev{{"a.yaml~", opMovedIn}}, nil},
		{"swap_file_written", nil, []ev{{".a.yaml.swp", opWrite}}, nil},
		{"symlink_created", map[string]string{"team": "elsewhere"}, []ev{{"team", opCreate}}, []string{"relist now"}},
		{"directory_created", nil, []ev{{"team", opCreate | opIsDir}}, []string{"relist later"}},
		{"directory_renamed_in", nil, []ev{{"team", opMovedIn | opIsDir}}, []string{"relist now"}},
		{"unknown_name_removed", nil, []ev{{"README", opRemove}}, []string{"relist later"}},
		{"config_dir_swapped", nil, []ev{{"/manifests.d", opMovedIn}}, []string{"relist now"}},
		{"config_dir_removed", nil, []ev{{"/manifests.d", opRemove | opIsDir}}, []string{"relist later"}},
		{"sibling_of_the_config_dir", nil, []ev{{"/other.yaml", opMovedIn}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			root := filepath.Join(parent, "manifests.d")
			if err := os.Mkdir(root, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, what := range tc.files {
				path := filepath.Join(root, name)
				var err error
				switch what {
				case "file":
					err = os.WriteFile(path, nil, 0o644)
				case "dir":
					err = os.Mkdir(path, 0o755)
				default:
					err = os.Symlink(what, path)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			w, err := newWatcher(root, clock.RealClock{}, time.Hour, -1, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer w.close()
			w.track(root, []string{root})
			for _, e := range tc.events {
				path := filepath.Join(root, e.name)
				if e.name[0] == '/' {
					path = filepath.Join(parent, e.name)
				}
				w.note(fsEvent{path: path, op: e.op})
			}
			var got []string
			for rel := range w.now {
				got = append(got, "now "+rel)
			}
			for rel := range w.later {
				got = append(got, "later "+rel)
			}
			if w.relistNow {
				got = append(got, "relist now")
			}
			if !w.relistAt.IsZero() {
				got = append(got, "relist later")
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("after %v: %q, want %q", tc.events, got, tc.want)
			}
		})
	}
}
