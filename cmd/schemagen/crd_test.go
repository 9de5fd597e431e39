package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"

	"github.com/marshal-dev/marshal/api/loader"
	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/localapi"
)

// customResourceDefinition is the part of apiextensions.k8s.io/v1
// CustomResourceDefinition the generator writes. Decoding is strict, so a
// key the API does not have fails the test.
type customResourceDefinition struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Group string `json:"group"`
		Names struct {
			Kind       string   `json:"kind"`
			ListKind   string   `json:"listKind"`
			Plural     string   `json:"plural"`
			Singular   string   `json:"singular"`
			ShortNames []string `json:"shortNames"`
			Categories []string `json:"categories"`
		} `json:"names"`
		Scope    string `json:"scope"`
		Versions []struct {
			Name         string `json:"name"`
			Served       bool   `json:"served"`
			Storage      bool   `json:"storage"`
			Subresources *struct {
				Status *struct{} `json:"status"`
			} `json:"subresources"`
			AdditionalPrinterColumns []struct {
				Name        string `json:"name"`
				Type        string `json:"type"`
				Format      string `json:"format"`
				Description string `json:"description"`
				Priority    int32  `json:"priority"`
				JSONPath    string `json:"jsonPath"`
			} `json:"additionalPrinterColumns"`
			Schema struct {
				OpenAPIV3Schema *schemaProps `json:"openAPIV3Schema"`
			} `json:"schema"`
		} `json:"versions"`
	} `json:"spec"`
}

// schemaProps is apiextensions.k8s.io/v1 JSONSchemaProps: the keywords
// Kubernetes reads. $ref, $defs, const, propertyNames and the other JSON
// Schema keywords it lacks fail the strict decoding.
type schemaProps struct {
	Description          string                 `json:"description,omitempty"`
	Type                 string                 `json:"type,omitempty"`
	Format               string                 `json:"format,omitempty"`
	Title                string                 `json:"title,omitempty"`
	Default              json.RawMessage        `json:"default,omitempty"`
	Maximum              *float64               `json:"maximum,omitempty"`
	ExclusiveMaximum     bool                   `json:"exclusiveMaximum,omitempty"`
	Minimum              *float64               `json:"minimum,omitempty"`
	ExclusiveMinimum     bool                   `json:"exclusiveMinimum,omitempty"`
	MaxLength            *int64                 `json:"maxLength,omitempty"`
	MinLength            *int64                 `json:"minLength,omitempty"`
	Pattern              string                 `json:"pattern,omitempty"`
	MaxItems             *int64                 `json:"maxItems,omitempty"`
	MinItems             *int64                 `json:"minItems,omitempty"`
	UniqueItems          bool                   `json:"uniqueItems,omitempty"`
	MultipleOf           *float64               `json:"multipleOf,omitempty"`
	Enum                 []json.RawMessage      `json:"enum,omitempty"`
	MaxProperties        *int64                 `json:"maxProperties,omitempty"`
	MinProperties        *int64                 `json:"minProperties,omitempty"`
	Required             []string               `json:"required,omitempty"`
	Items                *schemaProps           `json:"items,omitempty"`
	AllOf                []schemaProps          `json:"allOf,omitempty"`
	OneOf                []schemaProps          `json:"oneOf,omitempty"`
	AnyOf                []schemaProps          `json:"anyOf,omitempty"`
	Not                  *schemaProps           `json:"not,omitempty"`
	Properties           map[string]schemaProps `json:"properties,omitempty"`
	AdditionalProperties *schemaOrBool          `json:"additionalProperties,omitempty"`
	Nullable             bool                   `json:"nullable,omitempty"`
	PreserveUnknown      *bool                  `json:"x-kubernetes-preserve-unknown-fields,omitempty"`
	EmbeddedResource     bool                   `json:"x-kubernetes-embedded-resource,omitempty"`
	IntOrString          bool                   `json:"x-kubernetes-int-or-string,omitempty"`
	ListMapKeys          []string               `json:"x-kubernetes-list-map-keys,omitempty"`
	ListType             *string                `json:"x-kubernetes-list-type,omitempty"`
}

// schemaOrBool is JSONSchemaPropsOrBool.
type schemaOrBool struct {
	Allows *bool
	Schema *schemaProps
}

func (s *schemaOrBool) UnmarshalJSON(data []byte) error {
	if bytes.Equal(data, []byte("true")) || bytes.Equal(data, []byte("false")) {
		b := data[0] == 't'
		s.Allows = &b
		return nil
	}
	s.Schema = new(schemaProps)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(s.Schema)
}

// structuralErrors lists what keeps s from being a Kubernetes structural
// schema (KEP-1002), and what the API server refuses in a
// CustomResourceDefinition besides.
func structuralErrors(s *schemaProps) []string {
	var errs []string
	fail := func(at, format string, args ...any) {
		errs = append(errs, at+": "+fmt.Sprintf(format, args...))
	}
	if s.Type != "object" {
		fail("root", "type %q, want object", s.Type)
	}
	// With the status subresource, the API server extracts status from
	// the root schema, so the root may not constrain the object as a
	// whole.
	if len(s.Enum) > 0 || len(s.AllOf) > 0 || len(s.AnyOf) > 0 || len(s.OneOf) > 0 || s.Not != nil ||
		s.AdditionalProperties != nil || s.Nullable || s.Default != nil {
		fail("root", "only description, type, properties and required belong at the root")
	}
	if m, ok := s.Properties["metadata"]; ok {
		if m.Type != "object" || len(m.Properties) > 0 || m.AdditionalProperties != nil || m.Description != "" ||
			len(m.Required) > 0 || m.PreserveUnknown != nil {
			fail("metadata", "must be only type: object")
		}
	}
	var walk func(s *schemaProps, at string, inJunctor bool)
	walk = func(s *schemaProps, at string, inJunctor bool) {
		if inJunctor {
			if s.Type != "" || s.Description != "" || s.Default != nil || s.AdditionalProperties != nil || s.Nullable {
				fail(at, "type, description, default, additionalProperties or nullable inside allOf, anyOf, oneOf or not")
			}
		} else if s.Type == "" && !s.IntOrString && (s.PreserveUnknown == nil || !*s.PreserveUnknown) {
			fail(at, "no type")
		}
		if !inJunctor && !slices.Contains([]string{"object", "array", "string", "integer", "number", "boolean", ""}, s.Type) {
			fail(at, "type %q is not an OpenAPI type", s.Type)
		}
		if s.PreserveUnknown != nil && !*s.PreserveUnknown {
			fail(at, "x-kubernetes-preserve-unknown-fields false is forbidden")
		}
		if s.UniqueItems {
			fail(at, "uniqueItems true is forbidden")
		}
		if s.AdditionalProperties != nil {
			switch {
			case s.AdditionalProperties.Allows != nil && !*s.AdditionalProperties.Allows:
				fail(at, "additionalProperties false: rely on pruning")
			case len(s.Properties) > 0:
				fail(at, "properties and additionalProperties together")
			}
		}
		if len(s.Properties) > 0 && s.Type != "object" && !inJunctor {
			fail(at, "properties on a %q", s.Type)
		}
		if s.Type == "array" && s.Items == nil {
			fail(at, "a list without items")
		}
		if s.Items != nil && s.Type != "array" && !inJunctor {
			fail(at, "items on a %q", s.Type)
		}
		if (s.Pattern != "" || s.MinLength != nil || s.MaxLength != nil) && s.Type != "string" && !inJunctor {
			fail(at, "string keywords on a %q", s.Type)
		}
		if (s.Minimum != nil || s.Maximum != nil) && s.Type != "integer" && s.Type != "number" && !inJunctor {
			fail(at, "numeric bounds on a %q", s.Type)
		}
		for _, e := range s.Enum {
			var v any
			if err := json.Unmarshal(e, &v); err != nil || !jsonTypeIs(v, s.Type) {
				fail(at, "enum value %s is not a %s", e, s.Type)
			}
		}
		for _, r := range s.Required {
			if _, ok := s.Properties[r]; !ok {
				fail(at, "required %q is not a property", r)
			}
		}
		for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
			p := s.Properties[name]
			walk(&p, at+"."+name, inJunctor)
		}
		if s.Items != nil {
			walk(s.Items, at+"[]", inJunctor)
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			walk(s.AdditionalProperties.Schema, at+"{}", inJunctor)
		}
		for kw, list := range map[string][]schemaProps{"allOf": s.AllOf, "anyOf": s.AnyOf, "oneOf": s.OneOf} {
			for i := range list {
				j := &list[i]
				walk(j, fmt.Sprintf("%s.%s[%d]", at, kw, i), true)
				specifiedOutside(s, j, at+"."+kw, fail)
			}
		}
		if s.Not != nil {
			walk(s.Not, at+".not", true)
			specifiedOutside(s, s.Not, at+".not", fail)
		}
	}
	walk(s, "root", false)
	return errs
}

// specifiedOutside checks that every field and item a junctor j of s
// names, s names too.
func specifiedOutside(s, j *schemaProps, at string, fail func(at, format string, args ...any)) {
	for name := range j.Properties {
		if _, ok := s.Properties[name]; !ok {
			fail(at, "field %q only inside a junctor", name)
		}
	}
	if j.Items != nil && s.Items == nil {
		fail(at, "items only inside a junctor")
	}
}

func jsonTypeIs(v any, typ string) bool {
	switch v := v.(type) {
	case string:
		return typ == "string"
	case bool:
		return typ == "boolean"
	case float64:
		return typ == "number" || (typ == "integer" && v == float64(int64(v)))
	}
	return false
}

func readCRD(t *testing.T, kind string) (*customResourceDefinition, []byte) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(moduleRoot, outDir, crdDir, crdFile(kind)))
	if err != nil {
		t.Fatal(err)
	}
	var crd customResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		t.Fatalf("%s does not decode as a CustomResourceDefinition: %v", crdFile(kind), err)
	}
	return &crd, data
}

func TestCRDsAreStructural(t *testing.T) {
	for _, kind := range v1alpha1.Kinds {
		t.Run(strings.ToLower(kind), func(t *testing.T) {
			crd, _ := readCRD(t, kind)
			res := localapi.Resources[slices.IndexFunc(localapi.Resources, func(r localapi.Resource) bool { return r.Kind == kind })]
			singular := strings.ToLower(kind)
			wantShort := slices.DeleteFunc(slices.Clone(res.Short), func(s string) bool { return s == singular })
			n := crd.Spec.Names
			switch {
			case crd.APIVersion != "apiextensions.k8s.io/v1" || crd.Kind != "CustomResourceDefinition":
				t.Errorf("apiVersion %q, kind %q", crd.APIVersion, crd.Kind)
			case crd.Metadata.Name != res.Plural+"."+v1alpha1.Group:
				t.Errorf("metadata.name = %q, want %q", crd.Metadata.Name, res.Plural+"."+v1alpha1.Group)
			case crd.Spec.Group != v1alpha1.Group || crd.Spec.Scope != "Cluster":
				t.Errorf("group %q, scope %q", crd.Spec.Group, crd.Spec.Scope)
			case n.Kind != kind || n.ListKind != kind+"List" || n.Plural != res.Plural || n.Singular != singular:
				t.Errorf("names = %+v", n)
			case !slices.Equal(n.ShortNames, wantShort):
				t.Errorf("shortNames = %q, want %q (marshalctl's)", n.ShortNames, wantShort)
			case len(crd.Spec.Versions) != 1:
				t.Fatalf("%d versions, want 1", len(crd.Spec.Versions))
			}
			v := crd.Spec.Versions[0]
			if v.Name != v1alpha1.Version || !v.Served || !v.Storage {
				t.Errorf("version %q served %v storage %v", v.Name, v.Served, v.Storage)
			}
			if v.Subresources == nil || v.Subresources.Status == nil {
				t.Error("no status subresource")
			}
			s := v.Schema.OpenAPIV3Schema
			if s == nil {
				t.Fatal("no openAPIV3Schema")
			}
			for _, e := range structuralErrors(s) {
				t.Errorf("not structural: %s", e)
			}
			for _, f := range []string{"apiVersion", "kind", "metadata", "spec", "status"} {
				if _, ok := s.Properties[f]; !ok {
					t.Errorf("the schema has no %s", f)
				}
			}
			if len(v.AdditionalPrinterColumns) == 0 {
				t.Error("no printer columns")
			}
			for _, c := range v.AdditionalPrinterColumns {
				checkColumn(t, s, c.Name, c.Type, c.JSONPath)
			}
		})
	}
}

// checkColumn checks that a printer column shows a field of the schema,
// with the field's type.
func checkColumn(t *testing.T, s *schemaProps, name, typ, jsonPath string) {
	t.Helper()
	if jsonPath == ".metadata.creationTimestamp" {
		if typ != "date" {
			t.Errorf("column %s: type %q, want date", name, typ)
		}
		return
	}
	field := s
	rest := strings.TrimPrefix(jsonPath, ".")
	for rest != "" {
		seg := rest
		if i := strings.IndexAny(rest, ".["); i >= 0 {
			seg, rest = rest[:i], rest[i:]
		} else {
			rest = ""
		}
		p, ok := field.Properties[seg]
		if !ok {
			t.Errorf("column %s: %s: no field %q", name, jsonPath, seg)
			return
		}
		field = &p
		if strings.HasPrefix(rest, "[") {
			if field.Items == nil {
				t.Errorf("column %s: %s: %q is not a list", name, jsonPath, seg)
				return
			}
			field, rest = field.Items, rest[strings.IndexByte(rest, ']')+1:]
		}
		rest = strings.TrimPrefix(rest, ".")
	}
	want := field.Type
	if field.Format == "date-time" {
		want = "date"
	}
	if typ != want {
		t.Errorf("column %s: type %q, want %q (the field's)", name, typ, want)
	}
}

// TestStructuralErrorsFindsViolations shows the walk can fail: each
// schema breaks one rule.
func TestStructuralErrorsFindsViolations(t *testing.T) {
	tests := []struct {
		name, schema, want string
	}{
		{"missing_type", `{type: object, properties: {spec: {properties: {a: {type: string}}}}}`, "root.spec: no type"},
		{"additional_properties_false", `{type: object, properties: {spec: {type: object, additionalProperties: false}}}`, "additionalProperties false"},
		{"properties_and_additional_properties", `{type: object, properties: {spec: {type: object, properties: {a: {type: string}}, additionalProperties: {type: string}}}}`, "properties and additionalProperties together"},
		{"type_in_junctor", `{type: object, properties: {spec: {type: string, anyOf: [{type: string}]}}}`, "inside allOf"},
		{"field_only_in_junctor", `{type: object, properties: {spec: {type: object, allOf: [{properties: {a: {pattern: x}}}]}}}`, "only inside a junctor"},
		{"metadata_constrained", `{type: object, properties: {metadata: {type: object, properties: {name: {type: string}}}}}`, "metadata: must be only type: object"},
		{"enum_of_wrong_type", `{type: object, properties: {spec: {type: integer, enum: [a]}}}`, "enum value"},
		{"pattern_on_integer", `{type: object, properties: {spec: {type: integer, pattern: x}}}`, "string keywords"},
		{"preserve_unknown_false", `{type: object, x-kubernetes-preserve-unknown-fields: false}`, "preserve-unknown-fields false"},
		{"junctor_at_the_root", `{type: object, anyOf: [{required: [spec]}], properties: {spec: {type: object}}}`, "belong at the root"},
		{"unique_items", `{type: object, properties: {spec: {type: array, items: {type: string}, uniqueItems: true}}}`, "uniqueItems"},
		{"list_without_items", `{type: object, properties: {spec: {type: array}}}`, "without items"},
		{"required_unknown_field", `{type: object, properties: {spec: {type: object, required: [a]}}}`, "required \"a\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s schemaProps
			if err := yaml.UnmarshalStrict([]byte(tc.schema), &s); err != nil {
				t.Fatal(err)
			}
			errs := structuralErrors(&s)
			if !slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, tc.want) }) {
				t.Errorf("structuralErrors = %q, want one with %q", errs, tc.want)
			}
		})
	}
	for _, kw := range []string{`$ref: "#/$defs/X"`, `const: x`, `propertyNames: {pattern: x}`, `$defs: {}`, `examples: [x]`} {
		if err := yaml.UnmarshalStrict([]byte("{type: object, "+kw+"}"), new(schemaProps)); err == nil {
			t.Errorf("decoding a schema with %s succeeded: JSON Schema keywords must not reach a CRD", kw)
		}
	}
}

// crdSchema compiles a CRD's openAPIV3Schema as a JSON Schema: for the
// keywords a structural schema uses, OpenAPI v3 and JSON Schema agree.
func crdSchema(t *testing.T, kind string) *jsonschema.Schema {
	t.Helper()
	_, data := readCRD(t, kind)
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema json.RawMessage `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(j, &crd); err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft4)
	url := "mem:///" + kind + ".json"
	if err := c.AddResource(url, instance(t, crd.Spec.Versions[0].Schema.OpenAPIV3Schema)); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(url)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// pruneNulls drops nulls from objects, as the API server does with a null
// that its schema does not declare nullable.
func pruneNulls(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if e == nil {
				delete(v, k)
				continue
			}
			v[k] = pruneNulls(e)
		}
	case []any:
		for i, e := range v {
			v[i] = pruneNulls(e)
		}
	}
	return v
}

// TestCRDSchemasCarryTheConstraints validates the examples and the
// loader's good files against each CRD's schema, and some invalid values
// the CRD must refuse too.
func TestCRDSchemasCarryTheConstraints(t *testing.T) {
	byKind := map[string]*jsonschema.Schema{}
	for _, kind := range v1alpha1.Kinds {
		byKind[kind] = crdSchema(t, kind)
	}
	var files []string
	for _, pattern := range []string{"manifests/*.yaml", "api/loader/testdata/good*.y*ml"} {
		m, err := filepath.Glob(filepath.Join(moduleRoot, pattern))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range documents(t, f, data) {
			if err := byKind[d.kind].Validate(pruneNulls(instance(t, d.json))); err != nil {
				t.Errorf("%s:%d: the %s CRD refuses it: %v", f, d.line, d.kind, err)
			}
		}
	}
	refused := []string{
		profileHead + "spec: {limits: {cpu_milli: -1}}\n",
		profileHead + "spec: {isolation: vm}\n",
		workspaceHead + "spec: {root: relative, profile: coder}\n",
		workspaceHead + "spec: {profile: coder}\n",
		workspaceSpec + "  resources: {request: {tasks: 4}}\n",
		workspaceSpec + "  resources: {participation: optional, request: {minimum: {pids: strict}}}\n",
		consumerHead + "spec: {generation: g1, role: workload, credential_sha256: " + digestA + ", max_instances: 65}\n",
		consumerHead + "spec: {generation: \"a b\", role: workload, credential_sha256: " + digestA + ", max_instances: 1}\n",
		workspaceSpec + "  exec: {argv0: [\"\"]}\n",
		hostHead + "spec: {prepared_ttl: 0s}\n",
		hostHead + "spec: {capacity: {tasks: \"5\"}}\n",
	}
	for _, doc := range refused {
		if lf := loader.LoadBytes("case.yaml", []byte(doc)); len(lf.Errors) == 0 {
			t.Fatalf("the loader accepts a case meant to be refused:\n%s", doc)
		}
		d := documents(t, "case.yaml", []byte(doc))[0]
		if err := byKind[d.kind].Validate(pruneNulls(instance(t, d.json))); err == nil {
			t.Errorf("the %s CRD accepts what the loader refuses:\n%s", d.kind, doc)
		}
	}
}

func mustParse(t *testing.T, s string) *object {
	t.Helper()
	v, err := parseJSON([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v.(*object)
}

func TestConvert(t *testing.T) {
	defs := defs{"Limits": obj("description", "Limits caps.", "type", "object",
		"properties", obj("tasks", obj("type", "integer")), "additionalProperties", false)}
	tests := []struct {
		name, in, want string
	}{
		{"const_becomes_enum", `{"type": "string", "const": "Host"}`, `{"type":"string","enum":["Host"]}`},
		{"null_leaves_enum_and_type", `{"type": ["string", "null"], "enum": ["a", "", null]}`, `{"type":"string","enum":["a",""]}`},
		{"int64_bound_becomes_format", `{"type": "integer", "minimum": 1, "maximum": 9223372036854775807}`, `{"type":"integer","minimum":1,"format":"int64"}`},
		{"other_bound_stays", `{"type": "integer", "maximum": 10}`, `{"type":"integer","maximum":10}`},
		{"ref_is_inlined_under_the_field_description", `{"description": "The limits.", "$ref": "#/$defs/Limits"}`,
			`{"description":"The limits.","type":"object","properties":{"tasks":{"type":"integer"}}}`},
		{"nullable_ref", `{"description": "The limits.", "anyOf": [{"$ref": "#/$defs/Limits"}, {"type": "null"}]}`,
			`{"description":"The limits.","type":"object","properties":{"tasks":{"type":"integer"}}}`},
		{"map_keys_and_read_only_dropped", `{"type": "object", "readOnly": true, "propertyNames": {"type": "string", "pattern": "^a"}, "additionalProperties": {"type": "string"}}`,
			`{"type":"object","additionalProperties":{"type":"string"}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := (&converter{defs: defs}).convert(mustParse(t, tc.in))
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := writeJSON(&b, got, ""); err != nil {
				t.Fatal(err)
			}
			var compact bytes.Buffer
			if err := json.Compact(&compact, b.Bytes()); err != nil {
				t.Fatal(err)
			}
			if compact.String() != tc.want {
				t.Errorf("convert(%s) = %s, want %s", tc.in, compact.String(), tc.want)
			}
		})
	}
}

func TestConvertRefusesWhatIsNotStructural(t *testing.T) {
	tests := []struct {
		name, in string
	}{
		{"unknown_keyword", `{"type": "object", "patternProperties": {"^a": {"type": "string"}}}`},
		{"any_of_two_schemas", `{"anyOf": [{"type": "string"}, {"type": "integer"}]}`},
		{"two_types", `{"type": ["string", "integer"]}`},
		{"unresolved_ref", `{"$ref": "#/$defs/Missing"}`},
		{"no_type", `{"description": "anything"}`},
		{"additional_properties_true", `{"type": "object", "additionalProperties": true}`},
		{"not_outside_map_keys", `{"type": "string", "not": {"pattern": "x"}}`},
		{"nested_unknown_keyword", `{"type": "object", "properties": {"a": {"type": "string", "examples": ["x"]}}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := (&converter{defs: defs{}}).convert(mustParse(t, tc.in))
			if !errors.Is(err, errNotStructural) {
				t.Errorf("convert(%s) = %v, want %v", tc.in, err, errNotStructural)
			}
		})
	}
}

func TestResolveJSONPath(t *testing.T) {
	schema := mustParse(t, `{"type": "object", "properties": {
		"status": {"type": "object", "properties": {
			"agents": {"type": "integer"},
			"conditions": {"type": "array", "items": {"type": "object", "properties": {"status": {"type": "string"}}}}}}}}`)
	tests := []struct {
		name, path, want string
	}{
		{"field", ".status.agents", "integer"},
		{"filtered_list", `.status.conditions[?(@.type=="Ready")].status`, "string"},
		{"missing_field", ".status.slice", ""},
		{"filter_on_a_scalar", ".status.agents[0]", ""},
		{"not_from_the_root", "status.agents", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolveJSONPath(schema, tc.path)
			if tc.want == "" {
				if !errors.Is(err, errPrinterColumn) {
					t.Errorf("resolveJSONPath(%q) = %v, want %v", tc.path, err, errPrinterColumn)
				}
				return
			}
			if err != nil || got.str("type") != tc.want {
				t.Errorf("resolveJSONPath(%q) = %v, %v, want type %s", tc.path, got, err, tc.want)
			}
		})
	}
}
