package v1alpha1

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite reference.md and the README's reference section")

const (
	docPath     = "../../docs/manifest-reference.md"
	docHeader   = "<!-- Generated from the doc comments of api/v1alpha1 by make generate; do not edit. -->\n\n# Manifest reference\n\n"
	readmePath  = "../../README.md"
	readmeBegin = "<!-- reference:begin (generated from api/v1alpha1; do not edit) -->\n"
	readmeEnd   = "<!-- reference:end -->\n"
)

// fieldDocs reads the doc comments of every struct field in types.go,
// keyed by "Type.Field".
func fieldDocs(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "types.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			return false
		}
		for _, fl := range st.Fields.List {
			for _, name := range fl.Names {
				docs[ts.Name.Name+"."+name.Name] = strings.Join(strings.Fields(fl.Doc.Text()), " ")
			}
		}
		return false
	})
	return docs
}

var durationType = reflect.TypeFor[Duration]()

func yamlType(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == durationType:
		return "duration"
	case t.Kind() == reflect.String:
		return "string"
	case t.Kind() == reflect.Bool:
		return "boolean"
	case t.Kind() == reflect.Int64, t.Kind() == reflect.Int32:
		return "integer"
	case t.Kind() == reflect.Slice:
		return "list of " + yamlType(t.Elem())
	case t.Kind() == reflect.Map:
		return "map of " + yamlType(t.Elem())
	}
	return "object"
}

// declarable reports whether a manifest may set the field at path.
func declarable(path string) bool {
	switch path {
	case "status", "metadata.generation", "metadata.creationTimestamp", "apiVersion", "kind":
		return false
	}
	return true
}

// userDoc drops the Go field name that starts a doc comment ("MaxLive is
// the number…" → "The number…"): readers of manifests know the key.
func userDoc(field, doc string) string {
	for _, verb := range []string{" is ", " are "} {
		if rest, ok := strings.CutPrefix(doc, field+verb); ok && rest != "" {
			return strings.ToUpper(rest[:1]) + rest[1:]
		}
	}
	return doc
}

func writeFields(b *bytes.Buffer, docs map[string]string, t reflect.Type, prefix string) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		path := prefix + name
		if !declarable(path) {
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		fmt.Fprintf(b, "- `%s` (%s): %s\n", path, yamlType(f.Type), userDoc(f.Name, docs[t.Name()+"."+f.Name]))
		switch {
		case ft.Kind() == reflect.Struct && ft != durationType:
			writeFields(b, docs, ft, path+".")
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			// Each element's fields, as kubectl explain lists them.
			writeFields(b, docs, ft.Elem(), path+"[].")
		}
	}
}

func generateReference(t *testing.T) string {
	docs := fieldDocs(t)
	var b bytes.Buffer
	b.WriteString("Every manifest starts with `apiVersion: " + APIVersion + "` and a `kind`;\n" +
		"keys are strict: an unknown key, a duplicate key or a wrong type fails the\n" +
		"file's load with FILE:LINE: KIND \"NAME\": field.path: what is wrong.\n")
	for _, kind := range []string{KindProfile, KindWorkspace, KindHost} {
		obj := New(kind)
		typ := reflect.TypeOf(obj).Elem()
		fmt.Fprintf(&b, "\n#### %s\n\n", kind)
		typeDoc := kindDocs[kind]
		b.WriteString(typeDoc + "\n\n")
		writeFields(&b, docs, typ, "")
	}
	return b.String()
}

// kindDocs is the first paragraph of each kind's type comment.
var kindDocs = map[string]string{}

func init() {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "types.go", nil, parser.ParseComments)
	if err != nil {
		return
	}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.TYPE {
			continue
		}
		for _, s := range gd.Specs {
			ts := s.(*ast.TypeSpec)
			if New(ts.Name.Name) != nil {
				kindDocs[ts.Name.Name] = strings.Join(strings.Fields(gd.Doc.Text()), " ")
			}
		}
	}
}

func TestReferenceIsCurrent(t *testing.T) {
	want := generateReference(t)
	if *update {
		if err := os.WriteFile("reference.md", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	} else if Reference != want {
		t.Errorf("reference.md is stale: run go test ./api/v1alpha1 -run TestReference -update")
	}

	doc := docHeader + want
	if *update {
		if err := os.WriteFile(docPath, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	} else if got, err := os.ReadFile(docPath); err != nil || string(got) != doc {
		t.Errorf("%s is stale: run make generate", docPath)
	}

	readme, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok1 := strings.Cut(string(readme), readmeBegin)
	_, after, ok2 := strings.Cut(rest, readmeEnd)
	if !ok1 || !ok2 {
		t.Fatalf("README.md lacks the reference markers %q and %q", readmeBegin, readmeEnd)
	}
	fresh := before + readmeBegin + want + readmeEnd + after
	if *update {
		if err := os.WriteFile(readmePath, []byte(fresh), 0o644); err != nil {
			t.Fatal(err)
		}
	} else if fresh != string(readme) {
		t.Errorf("README.md's reference section is stale: run go test ./api/v1alpha1 -run TestReference -update")
	}
}
