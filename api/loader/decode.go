package loader

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/marshal-dev/marshal/api/v1alpha1"
)

// maxAliasNodes bounds the nodes one document may decode through YAML
// aliases, so a small file cannot expand into a huge object ("billion
// laughs").
const maxAliasNodes = 1000

// planKind is how a Go type is decoded.
type planKind uint8

const (
	planString planKind = iota // string and named string types (enums)
	planBool
	planInt
	planUint
	planText // encoding.TextUnmarshaler, from a string
	planStruct
	planPtr
	planSlice
	planMap // string keys
	// planUnsupported is a type this decoder cannot fill (a float, an
	// interface, a map without string keys). A manifest that sets such a
	// field is refused; a test keeps the API free of them.
	planUnsupported
)

// plan is how to decode a node into a value of typ, worked out once per
// type from its json tags.
type plan struct {
	kind planKind
	typ  reflect.Type
	// fields are the keys of a struct, embedded inline structs flattened.
	fields []fieldPlan
	// names are the keys people may write, for suggestions.
	names []string
	// elem is the plan of the pointed-to, element or map value type.
	elem *plan
}

// fieldPlan is one key of a struct.
type fieldPlan struct {
	name  string
	index []int
	plan  *plan
	// readOnly, when set, is the message refusing the field: only
	// marshald writes it.
	readOnly string
}

func (p *plan) field(name string) int {
	for i := range p.fields {
		if p.fields[i].name == name {
			return i
		}
	}
	return -1
}

var textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()

// Messages for the fields only marshald writes.
const (
	msgStatus    = "is written by marshald and cannot be declared"
	msgSetByMeta = "is set by marshald and cannot be declared"
)

// readOnlyMeta lists the metadata fields only marshald writes. A manifest
// that declares one is refused before the value is decoded, as is a
// manifest that declares status.
var readOnlyMeta = map[string]string{
	"generation":        msgSetByMeta,
	"creationTimestamp": msgSetByMeta,
}

// kindPlans returns the plan of every served kind, made on first use: a
// program that links the loader without loading (marshalctl run) does not
// pay for it at start.
var kindPlans = sync.OnceValue(func() map[string]*plan {
	b := planBuilder{
		cache:    map[reflect.Type]*plan{},
		readOnly: map[reflect.Type]map[string]string{reflect.TypeFor[v1alpha1.ObjectMeta](): readOnlyMeta},
	}
	for _, kind := range v1alpha1.Kinds {
		b.readOnly[reflect.TypeOf(v1alpha1.New(kind)).Elem()] = map[string]string{"status": msgStatus}
	}
	plans := map[string]*plan{}
	for _, kind := range v1alpha1.Kinds {
		plans[kind] = b.plan(reflect.TypeOf(v1alpha1.New(kind)).Elem())
	}
	return plans
})

type planBuilder struct {
	cache map[reflect.Type]*plan
	// readOnly maps a struct type to its fields that only marshald
	// writes, with the message refusing each.
	readOnly map[reflect.Type]map[string]string
}

// plan returns the plan of t.
func (b *planBuilder) plan(t reflect.Type) *plan {
	if p, ok := b.cache[t]; ok {
		return p
	}
	p := &plan{typ: t}
	b.cache[t] = p
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface:
	default:
		// A text unmarshaler decodes itself, whatever its underlying kind.
		if reflect.PointerTo(t).Implements(textUnmarshalerType) {
			p.kind = planText
			return p
		}
	}
	switch t.Kind() {
	case reflect.String:
		p.kind = planString
	case reflect.Bool:
		p.kind = planBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		p.kind = planInt
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		p.kind = planUint
	case reflect.Pointer:
		p.kind, p.elem = planPtr, b.plan(t.Elem())
	case reflect.Slice:
		p.kind, p.elem = planSlice, b.plan(t.Elem())
	case reflect.Map:
		p.kind = planUnsupported
		if t.Key().Kind() == reflect.String {
			p.kind, p.elem = planMap, b.plan(t.Elem())
		}
	case reflect.Struct:
		p.kind = planStruct
		b.fields(p, t, nil)
		if len(p.fields) > 64 {
			// Duplicate keys are tracked in a 64-bit set.
			p.kind, p.fields = planUnsupported, nil
		}
		for _, f := range p.fields {
			if f.readOnly == "" {
				p.names = append(p.names, f.name)
			}
		}
	default:
		p.kind = planUnsupported
	}
	return p
}

// fields adds the keys of struct t, reached from the decoded struct by
// index, to p. Anonymous struct fields without a json name are inline.
func (b *planBuilder) fields(p *plan, t reflect.Type, index []int) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		idx := append(append([]int(nil), index...), i)
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct &&
			!reflect.PointerTo(f.Type).Implements(textUnmarshalerType) {
			b.fields(p, f.Type, idx)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if msg, ok := b.readOnly[t][name]; ok {
			// Never decoded, so its type need not be decodable.
			p.fields = append(p.fields, fieldPlan{name: name, index: idx, readOnly: msg})
			continue
		}
		p.fields = append(p.fields, fieldPlan{name: name, index: idx, plan: b.plan(f.Type)})
	}
}

// pathElem is one step of the decoder's position.
type pathElem struct {
	name  string // field name or map key
	index int    // list position
	step  uint8  // stepField, stepIndex or stepKey
	line  int    // line of the key or list element
}

const (
	stepField uint8 = iota
	stepIndex
	stepKey
)

// decoder decodes one document's nodes into an object, strictly, and
// collects every error with its line and field path.
type decoder struct {
	// rootLine is the line of the document's first node, where errors
	// about the whole object are reported; docLine is the line where the
	// document starts, its "---" if any.
	rootLine, docLine int
	path              []pathElem
	errs              []*Error
	// aliasDepth is how many aliases the decoder is inside; expanded
	// counts the nodes decoded through them.
	aliasDepth int
	expanded   int
	// aliasLine is the line of the outermost alias being expanded.
	aliasLine int
	// stopped is set when decoding must end: alias bound or error limit.
	stopped bool
	// ignoreReadOnly skips the fields only marshald writes instead of
	// refusing them (LoadInput).
	ignoreReadOnly bool
}

// line is the line of the current key or list element.
func (d *decoder) line() int {
	if len(d.path) == 0 {
		return d.rootLine
	}
	return d.path[len(d.path)-1].line
}

func (d *decoder) push(e pathElem) { d.path = append(d.path, e) }
func (d *decoder) pop()            { d.path = d.path[:len(d.path)-1] }

// fieldPath is the decoder's position as an API path.
func (d *decoder) fieldPath() v1alpha1.Path {
	var p v1alpha1.Path
	for _, e := range d.path {
		switch e.step {
		case stepField:
			p = p.Child(e.name)
		case stepIndex:
			p = p.Index(e.index)
		case stepKey:
			p = p.Key(e.name)
		}
	}
	return p
}

// fail records an error at the current key.
func (d *decoder) fail(class error, format string, args ...any) {
	d.failAt(d.line(), class, format, args...)
}

func (d *decoder) failAt(line int, class error, format string, args ...any) {
	// One error past the limit is kept, so the file says there were more.
	if len(d.errs) > maxErrorsPerFile {
		d.stopped = true
		return
	}
	d.errs = append(d.errs, &Error{
		Line:    line,
		Field:   d.fieldPath().String(),
		Message: fmt.Sprintf(format, args...),
		class:   class,
	})
}

// expand counts one node decoded through an alias and reports whether
// decoding may go on.
func (d *decoder) expand() bool {
	if d.aliasDepth == 0 {
		return true
	}
	d.expanded++
	if d.expanded > maxAliasNodes {
		d.failAt(d.aliasLine, ErrAlias, "aliases expand to more than %d nodes", maxAliasNodes)
		d.stopped = true
		return false
	}
	return true
}

// enterAlias checks alias n and, when it may be followed, counts the
// decoder as inside it; the caller leaves with aliasDepth--.
func (d *decoder) enterAlias(n *yaml.Node) bool {
	// The parser keeps anchors from one document to the next; YAML scopes
	// them to their document, and following them across documents would
	// let every small document expand a large anchor again.
	if n.Alias.Line < d.docLine {
		d.failAt(n.Line, ErrAlias, "alias *%s refers to an anchor in an earlier document; anchors are local to their document", n.Value)
		return false
	}
	if d.aliasDepth == 0 {
		d.aliasLine = n.Line
	}
	d.aliasDepth++
	return true
}

// value decodes n into v, which is addressable, by plan p.
func (d *decoder) value(n *yaml.Node, v reflect.Value, p *plan) {
	if d.stopped {
		return
	}
	if n.Kind == yaml.AliasNode {
		if !d.enterAlias(n) {
			return
		}
		d.value(n.Alias, v, p)
		d.aliasDepth--
		return
	}
	if !d.expand() || isNull(n) {
		// An explicit null is the same as an omitted key.
		return
	}
	d.decode(n, v, p)
}

func (d *decoder) decode(n *yaml.Node, v reflect.Value, p *plan) {
	switch p.kind {
	case planString:
		if !isString(n) {
			d.wrongType(n, "a string")
			return
		}
		v.SetString(n.Value)
	case planBool:
		b, ok := parseBool(n)
		if !ok {
			d.wrongType(n, "true or false")
			return
		}
		v.SetBool(b)
	case planInt:
		d.int(n, v)
	case planUint:
		d.uint(n, v)
	case planUnsupported:
		d.fail(ErrType, "cannot be set in a manifest (%s)", p.typ)
	case planText:
		d.text(n, v)
	case planPtr:
		if v.IsNil() {
			v.Set(reflect.New(p.typ.Elem()))
		}
		d.decode(n, v.Elem(), p.elem)
	case planStruct:
		d.structure(n, v, p)
	case planSlice:
		d.list(n, v, p)
	case planMap:
		d.mapping(n, v, p)
	}
}

func (d *decoder) int(n *yaml.Node, v reflect.Value) {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
		d.wrongType(n, "an integer")
		return
	}
	i, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64)
	switch {
	case errors.Is(err, strconv.ErrRange) || (err == nil && v.OverflowInt(i)):
		d.fail(ErrType, "must be an integer that fits in %d bits, got %s", v.Type().Bits(), n.Value)
	case err != nil:
		d.wrongType(n, "an integer")
	default:
		v.SetInt(i)
	}
}

func (d *decoder) uint(n *yaml.Node, v reflect.Value) {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
		d.wrongType(n, "a non-negative integer")
		return
	}
	plain := strings.ReplaceAll(n.Value, "_", "")
	if strings.HasPrefix(plain, "-") {
		d.wrongType(n, "a non-negative integer")
		return
	}
	u, err := strconv.ParseUint(strings.TrimPrefix(plain, "+"), 0, 64)
	switch {
	case errors.Is(err, strconv.ErrRange) || (err == nil && v.OverflowUint(u)):
		d.fail(ErrType, "must be an integer that fits in %d bits, got %s", v.Type().Bits(), n.Value)
	case err != nil:
		d.wrongType(n, "a non-negative integer")
	default:
		v.SetUint(u)
	}
}

func (d *decoder) text(n *yaml.Node, v reflect.Value) {
	u := v.Addr().Interface().(encoding.TextUnmarshaler)
	if isString(n) {
		if err := u.UnmarshalText([]byte(n.Value)); err != nil {
			d.fail(ErrType, "%s", err.Error())
		}
		return
	}
	// The type's own message says best what a value should look like
	// (a duration such as 5s), when it refuses the text too.
	if n.Kind == yaml.ScalarNode {
		scratch := reflect.New(v.Type()).Interface().(encoding.TextUnmarshaler)
		if err := scratch.UnmarshalText([]byte(n.Value)); err != nil {
			d.fail(ErrType, "%s", err.Error())
			return
		}
	}
	d.wrongType(n, "a string")
}

func (d *decoder) structure(n *yaml.Node, v reflect.Value, p *plan) {
	if n.Kind != yaml.MappingNode {
		d.wrongType(n, "a mapping")
		return
	}
	var seen uint64
	for i := 0; i+1 < len(n.Content) && !d.stopped; i += 2 {
		key, ok := d.key(n.Content[i], n.Content[i+1])
		if !ok {
			continue
		}
		fi := p.field(key.Value)
		if fi < 0 {
			d.push(pathElem{name: key.Value, line: n.Content[i].Line})
			if s := suggest(key.Value, p.names); s != "" {
				d.fail(ErrUnknownField, "unknown field (did you mean %q?)", s)
			} else {
				d.fail(ErrUnknownField, "unknown field (known fields: %s)", strings.Join(p.names, ", "))
			}
			d.pop()
			continue
		}
		f := &p.fields[fi]
		d.push(pathElem{name: f.name, line: n.Content[i].Line})
		switch {
		case seen&(1<<fi) != 0:
			d.fail(ErrDuplicateKey, "duplicate key (first at line %d)", firstKeyLine(n, key.Value))
		case f.readOnly != "" && d.ignoreReadOnly:
		case f.readOnly != "":
			d.fail(ErrReadOnly, "%s", f.readOnly)
		default:
			d.value(n.Content[i+1], fieldByIndex(v, f.index), f.plan)
		}
		seen |= 1 << fi
		d.pop()
	}
}

func fieldByIndex(v reflect.Value, index []int) reflect.Value {
	if len(index) == 1 {
		return v.Field(index[0])
	}
	return v.FieldByIndex(index)
}

// key resolves a mapping key, whose value is val, and checks that it is a
// plain string key. It reports an error and false otherwise.
func (d *decoder) key(k, val *yaml.Node) (*yaml.Node, bool) {
	line := k.Line
	if k.Kind == yaml.AliasNode {
		if !d.enterAlias(k) {
			return nil, false
		}
		ok := d.expand()
		d.aliasDepth--
		if !ok {
			return nil, false
		}
		k = k.Alias
	} else if !d.expand() {
		return nil, false
	}
	switch {
	case k.Kind == yaml.ScalarNode && k.Tag == "!!merge" && merges(val):
		d.failAt(line, ErrAlias, `merge keys ("<<") are not supported; write the fields out`)
		return nil, false
	case k.Kind != yaml.ScalarNode || isNull(k):
		d.failAt(line, ErrType, "keys must be strings, got %s", describe(k))
		return nil, false
	}
	return k, true
}

// merges reports whether val, the value of a plain "<<" key, makes the
// key a merge key: only a mapping or a list (of mappings) can be merged.
// Under a scalar value "<<" is the string it reads as, which is how
// sigs.k8s.io/yaml writes a key "<<" (an environment variable's name).
func merges(val *yaml.Node) bool {
	if val.Kind == yaml.AliasNode && val.Alias != nil {
		val = val.Alias
	}
	return val.Kind != yaml.ScalarNode
}

// firstKeyLine is the line of the first key named name in mapping n.
func firstKeyLine(n *yaml.Node, name string) int {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind == yaml.AliasNode {
			k = k.Alias
		}
		if k.Kind == yaml.ScalarNode && k.Value == name {
			return n.Content[i].Line
		}
	}
	return 0
}

func (d *decoder) list(n *yaml.Node, v reflect.Value, p *plan) {
	if n.Kind != yaml.SequenceNode {
		d.wrongType(n, "a list")
		return
	}
	if len(n.Content) == 0 {
		// An empty list means the same as an omitted one.
		return
	}
	s := reflect.MakeSlice(p.typ, len(n.Content), len(n.Content))
	for i, e := range n.Content {
		d.push(pathElem{index: i, step: stepIndex, line: e.Line})
		d.value(e, s.Index(i), p.elem)
		d.pop()
	}
	v.Set(s)
}

func (d *decoder) mapping(n *yaml.Node, v reflect.Value, p *plan) {
	if n.Kind != yaml.MappingNode {
		d.wrongType(n, "a mapping")
		return
	}
	if len(n.Content) == 0 {
		// An empty map means the same as an omitted one.
		return
	}
	m := reflect.MakeMapWithSize(p.typ, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content) && !d.stopped; i += 2 {
		key, ok := d.key(n.Content[i], n.Content[i+1])
		if !ok {
			continue
		}
		kv := reflect.ValueOf(key.Value).Convert(p.typ.Key())
		d.push(pathElem{name: key.Value, step: stepKey, line: n.Content[i].Line})
		if m.MapIndex(kv).IsValid() {
			d.fail(ErrDuplicateKey, "duplicate key (first at line %d)", firstKeyLine(n, key.Value))
		} else {
			elem := reflect.New(p.typ.Elem()).Elem()
			d.value(n.Content[i+1], elem, p.elem)
			m.SetMapIndex(kv, elem)
		}
		d.pop()
	}
	v.Set(m)
}

func (d *decoder) wrongType(n *yaml.Node, want string) {
	d.fail(ErrType, "must be %s, got %s", want, describe(n))
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// isString reports whether n is a string scalar. A plain date (2024-01-01)
// counts: it is text unless something asks for a timestamp.
func isString(n *yaml.Node) bool {
	if n.Kind != yaml.ScalarNode {
		return false
	}
	switch n.Tag {
	case "!!str", "!!timestamp":
		return true
	case "!!merge":
		// The parser tags a plain "<<" as a merge key wherever it stands;
		// only as the key of a mapping to merge is it one (refused there),
		// and sigs.k8s.io/yaml writes the string "<<" plain.
		return true
	case "!!int", "!!float":
		// The parser reads some plain scalars as YAML 1.2 numbers ("0o17",
		// even "0o-0") that YAML 1.1 tools, kubectl's among them, read and
		// write as strings. Only the forms both read as numbers are
		// numbers to a string field.
		return n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) == 0 && !commonNumber().MatchString(n.Value)
	}
	return false
}

// commonNumber matches the numbers of both YAML 1.1 and YAML 1.2: decimal
// and hexadecimal integers, decimal floats, infinities and NaN.
var commonNumber = lazyRegexp(`^(?:[-+]?[0-9]+|0x[0-9a-fA-F]+|[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$`)

func parseBool(n *yaml.Node) (bool, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		return false, false
	}
	switch n.Value {
	case "true", "True", "TRUE":
		return true, true
	case "false", "False", "FALSE":
		return false, true
	}
	return false, false
}

// describe names what n is, for "must be X, got Y".
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return describe(n.Alias)
	}
	switch n.Tag {
	case "!!str":
		return "string " + strconv.Quote(clip(n.Value))
	case "!!int":
		return "integer " + clip(n.Value)
	case "!!float":
		return "number " + clip(n.Value)
	case "!!bool":
		return "boolean " + n.Value
	case "!!null":
		return "null"
	case "!!timestamp":
		return "timestamp " + clip(n.Value)
	}
	return "a value tagged " + n.Tag
}

// clip shortens s for a message.
func clip(s string) string {
	const limit = 40
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	return string([]rune(s)[:limit]) + "..."
}

// lazyRegexp compiles expr on first use.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
