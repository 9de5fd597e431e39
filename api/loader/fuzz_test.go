package loader

import (
	"os"
	"reflect"
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"
)

// FuzzLoadBytes checks that no input makes LoadBytes panic, that every
// error is well formed, that a file with errors loads no objects, and that
// a loaded object is valid and survives encoding and loading again. The
// seed corpus is every manifest in testdata.
func FuzzLoadBytes(f *testing.F) {
	for _, in := range inputs(f) {
		data, err := os.ReadFile(in)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, strings.HasSuffix(in, ".json"))
	}
	f.Fuzz(func(t *testing.T, data []byte, asJSON bool) {
		path := "fuzz.yaml"
		if asJSON {
			path = "fuzz.json"
		}
		file := LoadBytes(path, data)
		lines := lineCount(data)
		for _, e := range file.Errors {
			if e.File != path || e.Message == "" || e.Line < 0 || e.Line > lines || e.Unwrap() == nil {
				t.Fatalf("malformed error %+v (input has %d lines)", e, lines)
			}
		}
		if len(file.Errors) > 0 {
			if len(file.Objects) > 0 {
				t.Fatalf("%d objects from a file with errors %v", len(file.Objects), file.Errors)
			}
			return
		}
		for _, o := range file.Objects {
			if errs := o.Validate(); len(errs) > 0 {
				t.Fatalf("loaded object does not validate: %v", errs)
			}
			y, err := sigsyaml.Marshal(o.Object)
			if err != nil {
				// Strings YAML cannot hold raw, such as C1 controls, which
				// encoding/json writes unescaped; not the loader's concern.
				t.Skipf("cannot encode %#v: %v", o.Object, err)
			}
			again := LoadBytes("again.yaml", y)
			if len(again.Errors) > 0 || len(again.Objects) != 1 {
				t.Fatalf("reload of\n%s\n= %d objects, errors %v", y, len(again.Objects), again.Errors)
			}
			if !reflect.DeepEqual(again.Objects[0].Object, o.Object) {
				t.Fatalf("reload differs:\n--- loaded\n%#v\n--- reloaded\n%#v\n--- encoded\n%s", o.Object, again.Objects[0].Object, y)
			}
		}
	})
}
