package loader

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/marshal-dev/marshal/api/v1alpha1"
)

// MaxFileSize is the largest manifest file that loads, in bytes.
const MaxFileSize = 1 << 20

// maxErrorsPerFile bounds the errors kept for one file; the rest are
// summed up in one more.
const maxErrorsPerFile = 100

// Object is a loaded, validated, defaulted object and where it was
// declared.
type Object struct {
	v1alpha1.Object
	// File is the path of the file that declares the object.
	File string
	// Line is the line where the object's document starts.
	Line int
}

// File is the outcome of loading one file: its objects, or its errors and
// no objects at all.
type File struct {
	// Path is the file's path as the caller named it.
	Path string
	// Objects are the file's objects in document order; empty when the
	// file has errors.
	Objects []Object
	// Errors are the file's load errors, by line.
	Errors []*Error
}

// Matches reports whether a file of this base name is a manifest: it ends
// in .yaml, .yml or .json and is neither hidden nor an editor's temporary
// (name~, .name.swp, #name#, 4913, *.tmp).
func Matches(name string) bool {
	switch {
	case name == "" || name[0] == '.' || name == "4913":
		return false
	case strings.HasSuffix(name, "~"):
		return false
	case strings.HasPrefix(name, "#") && strings.HasSuffix(name, "#"):
		return false
	}
	switch filepath.Ext(name) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// LoadFile loads the file at path, whatever its extension, reading at most
// MaxFileSize bytes. It follows a symlink at path.
func LoadFile(path string) File {
	data, err := readFile(path, path, false)
	if err != nil {
		return File{Path: path, Errors: []*Error{err}}
	}
	return LoadBytes(path, data)
}

// LoadBytes loads the manifests in data. The path is used in messages
// only, and to read data as JSON when it ends in .json.
func LoadBytes(path string, data []byte) File {
	return loadBytes(path, data, false)
}

// LoadInput loads manifests that a person hands to marshalctl apply, diff
// or delete, as kubectl reads -f: as LoadBytes does, except that the
// fields only marshald writes (status, metadata.generation,
// metadata.creationTimestamp) are ignored instead of refused, and a
// document of kind List (apiVersion v1, as marshalctl get prints several
// objects) stands for its items. What get prints therefore applies as
// it is. A config dir's files are loaded with LoadBytes: there such a
// field would read as if it were declared.
func LoadInput(path string, data []byte) File {
	return loadBytes(path, data, true)
}

// loadBytes is LoadBytes, or LoadInput when input is set.
func loadBytes(path string, data []byte, input bool) File {
	f := File{Path: path}
	if len(data) > MaxFileSize {
		f.Errors = []*Error{tooLarge(path, int64(len(data)))}
		return f
	}
	if line, msg := checkText(data); msg != "" {
		f.Errors = []*Error{{File: path, Line: line, Message: msg, class: ErrEncoding}}
		return f
	}
	if strings.HasSuffix(path, ".json") {
		data = normalizeJSON(data)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for len(f.Errors) < maxErrorsPerFile {
		var doc yaml.Node
		if err := parseDocument(dec, &doc); err != nil {
			if err != io.EOF {
				line, msg := syntaxLine(err, data)
				f.Errors = append(f.Errors, &Error{File: path, Line: line, Message: "syntax error: " + msg, class: ErrSyntax})
			}
			break
		}
		objs, errs := loadDocument(path, &doc, input)
		f.Errors = append(f.Errors, errs...)
		f.Objects = append(f.Objects, objs...)
	}
	if len(f.Errors) > 0 {
		f.Objects = nil
		slices.SortStableFunc(f.Errors, func(a, b *Error) int {
			return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Field, b.Field))
		})
		if len(f.Errors) > maxErrorsPerFile {
			f.Errors = append(f.Errors[:maxErrorsPerFile:maxErrorsPerFile], &Error{
				File:    path,
				Message: fmt.Sprintf("too many errors; only the first %d are shown", maxErrorsPerFile),
				class:   f.Errors[maxErrorsPerFile].class,
			})
		}
	}
	return f
}

// parseDocument parses the next document of dec into doc. The parser is a
// third-party state machine fed with untrusted text; a panic inside it is
// a syntax error of this file, not the end of the process.
func parseDocument(dec *yaml.Decoder, doc *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("parser failed: %v", r)
		}
	}()
	return dec.Decode(doc)
}

func tooLarge(path string, size int64) *Error {
	return &Error{
		File:    path,
		Message: fmt.Sprintf("file is %d bytes, over the limit of %d (1 MiB)", size, MaxFileSize),
		class:   ErrTooLarge,
	}
}

// supportedKinds lists the kinds for messages.
var supportedKinds = strings.Join(v1alpha1.Kinds, ", ")

// loadDocument turns one parsed document into an object, or into the
// errors that keep it from being one. An empty document is neither. With
// input set, read-only fields are ignored and a List stands for its
// items.
func loadDocument(path string, doc *yaml.Node, input bool) ([]Object, []*Error) {
	if len(doc.Content) == 0 {
		return nil, nil
	}
	if input {
		if items, ok := listItems(doc.Content[0]); ok {
			var objs []Object
			var errs []*Error
			for _, item := range items {
				obj, e := loadObject(path, item, doc.Line, input)
				errs = append(errs, e...)
				if obj != nil {
					objs = append(objs, *obj)
				}
			}
			return objs, errs
		}
	}
	obj, errs := loadObject(path, doc.Content[0], doc.Line, input)
	if obj == nil {
		return nil, errs
	}
	return []Object{*obj}, errs
}

// listItems returns the items of a document that is a List as marshalctl
// get and kubectl print one: apiVersion v1, kind List, items, and
// metadata, which is ignored.
func listItems(top *yaml.Node) ([]*yaml.Node, bool) {
	root := top
	if root.Kind == yaml.AliasNode {
		root = root.Alias
	}
	apiVersion, kind := mapValue(root, "apiVersion"), mapValue(root, "kind")
	if apiVersion == nil || kind == nil || apiVersion.value.Value != "v1" || kind.value.Value != "List" {
		return nil, false
	}
	items := mapValue(root, "items")
	if items == nil || isNull(items.value) {
		return nil, true
	}
	if items.value.Kind != yaml.SequenceNode {
		return []*yaml.Node{items.value}, true // refused as not an object
	}
	return items.value.Content, true
}

// loadObject turns the top node of a document, or a List's item, into an
// object or into its errors; docLine is where its document starts.
func loadObject(path string, top *yaml.Node, docLine int, input bool) (*Object, []*Error) {
	root := top
	if root.Kind == yaml.AliasNode {
		root = root.Alias
	}
	if isNull(root) {
		return nil, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, []*Error{{
			File: path, Line: top.Line,
			Message: fmt.Sprintf("a document must be one object (a mapping), got %s", describe(root)),
			class:   ErrNotObject,
		}}
	}

	kind, errs := envelope(path, root)
	if len(errs) > 0 {
		// The kind as written names the object in messages even when
		// this version does not serve it.
		written := ""
		if k := mapValue(root, "kind"); k != nil && isString(k.value) {
			written = k.value.Value
		}
		name := scanName(root)
		for _, e := range errs {
			e.Kind, e.Name = written, name
		}
		return nil, errs
	}

	obj := v1alpha1.New(kind)
	d := decoder{rootLine: root.Line, docLine: docLine, ignoreReadOnly: input}
	d.value(top, reflect.ValueOf(obj).Elem(), kindPlans()[kind])
	name := obj.GetObjectMeta().Name
	errs = d.errs
	if !d.stopped {
		// Validation runs on what did decode too, so that one pass over
		// a file reports every error it has: a wrong type in one field
		// and a bad value in another. A field that failed to decode holds
		// its zero value, so what validation says at or around it is
		// left out.
		errs = append(errs, validationErrors(path, root, obj, d.errs)...)
	}
	if len(errs) > 0 {
		if name == "" {
			name = scanName(root)
		}
		for _, e := range errs {
			e.File, e.Kind, e.Name = path, kind, name
		}
		return nil, errs
	}
	obj.Default()
	return &Object{Object: obj, File: path, Line: root.Line}, nil
}

// validationErrors validates obj and returns its errors, less those at,
// above or below a field that failed to decode (decodeErrs).
func validationErrors(path string, root *yaml.Node, obj v1alpha1.Object, decodeErrs []*Error) []*Error {
	invalid := obj.Validate()
	var errs []*Error
	for _, fe := range invalid {
		// Looking up a line scans a mapping; bound the lookups, as the
		// file keeps only so many errors anyway.
		if len(errs)+len(decodeErrs) > maxErrorsPerFile {
			break
		}
		field := fe.Path.String()
		if slices.ContainsFunc(decodeErrs, func(e *Error) bool { return pathsOverlap(field, e.Field) }) {
			continue
		}
		errs = append(errs, &Error{
			File: path, Line: lineOf(root, fe.Path),
			Field: field, Message: fe.Message, class: ErrInvalid,
		})
	}
	return errs
}

// pathsOverlap reports whether field paths a and b are the same field or
// one lies inside the other. The empty path is the whole object, which
// overlaps nothing: an error there is about the document, not a field.
func pathsOverlap(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	inside := func(x, y string) bool {
		rest, ok := strings.CutPrefix(x, y)
		return ok && (rest == "" || rest[0] == '.' || rest[0] == '[')
	}
	return inside(a, b) || inside(b, a)
}

// envelope checks apiVersion and kind and returns the kind when this
// version serves it.
func envelope(path string, root *yaml.Node) (kind string, errs []*Error) {
	apiVersion, kindNode := mapValue(root, "apiVersion"), mapValue(root, "kind")
	fail := func(line int, field string, class error, format string, args ...any) {
		errs = append(errs, &Error{
			File: path, Line: line, Field: field,
			Message: fmt.Sprintf(format, args...), class: class,
		})
	}
	switch {
	case apiVersion == nil:
		fail(root.Line, "apiVersion", ErrNotObject, "required (supported: %s)", v1alpha1.APIVersion)
	case !isString(apiVersion.value):
		fail(apiVersion.line, "apiVersion", ErrType, "must be a string, got %s", describe(apiVersion.value))
	case apiVersion.value.Value != v1alpha1.APIVersion:
		fail(apiVersion.line, "apiVersion", ErrNotObject, "unknown apiVersion %q (supported: %s)",
			apiVersion.value.Value, v1alpha1.APIVersion)
	}
	switch {
	case kindNode == nil:
		fail(root.Line, "kind", ErrNotObject, "required (supported: %s)", supportedKinds)
	case !isString(kindNode.value):
		fail(kindNode.line, "kind", ErrType, "must be a string, got %s", describe(kindNode.value))
	case kindNode.value.Value == "List":
		fail(kindNode.line, "kind", ErrNotObject,
			`List is not supported: a document is exactly one object; separate objects with "---"`)
	case kindNode.value.Value == v1alpha1.KindAgent:
		fail(kindNode.line, "kind", ErrNotObject,
			"an Agent is marshald's view of a running launch and cannot be declared (supported: %s)", supportedKinds)
	case v1alpha1.New(kindNode.value.Value) == nil:
		k := kindNode.value.Value
		if s := suggest(k, v1alpha1.Kinds); s != "" {
			fail(kindNode.line, "kind", ErrNotObject, "unknown kind %q (did you mean %q?)", k, s)
		} else {
			fail(kindNode.line, "kind", ErrNotObject, "unknown kind %q (supported: %s)", k, supportedKinds)
		}
	default:
		kind = kindNode.value.Value
	}
	return kind, errs
}

// entry is a mapping value and the line of its key.
type entry struct {
	value *yaml.Node
	line  int
}

// mapValue returns the first value of key in mapping n, aliases resolved,
// or nil.
func mapValue(n *yaml.Node, key string) *entry {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind == yaml.AliasNode {
			k = k.Alias
		}
		if k.Kind == yaml.ScalarNode && k.Tag != "!!merge" && k.Value == key {
			v := n.Content[i+1]
			if v.Kind == yaml.AliasNode {
				v = v.Alias
			}
			return &entry{value: v, line: n.Content[i].Line}
		}
	}
	return nil
}

// scanName returns metadata.name when it is written as a string, for
// messages about an object that did not decode.
func scanName(root *yaml.Node) string {
	meta := mapValue(root, "metadata")
	if meta == nil {
		return ""
	}
	if name := mapValue(meta.value, "name"); name != nil && isString(name.value) {
		return name.value.Value
	}
	return ""
}

// lineOf is the line of the key or list element at path p, or, when it is
// absent, of its nearest present parent key; for a path with no present
// step, the line where the document starts.
func lineOf(root *yaml.Node, p v1alpha1.Path) int {
	line, n := root.Line, root
	for _, e := range p.Elems() {
		if n.Kind == yaml.AliasNode {
			n = n.Alias
		}
		if e.IsIndex {
			if n.Kind != yaml.SequenceNode || e.Index < 0 || e.Index >= len(n.Content) {
				return line
			}
			n = n.Content[e.Index]
			line = n.Line
			continue
		}
		key := e.Name
		if e.IsKey {
			key = e.Key
		}
		v := mapValue(n, key)
		if v == nil {
			return line
		}
		n, line = v.value, v.line
	}
	return line
}
