package main

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/localapi"
)

// crdFile is the name of a kind's CustomResourceDefinition, after the
// GROUP_PLURAL.yaml convention of Kubernetes generators.
func crdFile(kind string) string {
	r, _ := resourceOf(kind)
	return v1alpha1.Group + "_" + r.Plural + ".yaml"
}

func resourceOf(kind string) (localapi.Resource, error) {
	i := slices.IndexFunc(localapi.Resources, func(r localapi.Resource) bool { return r.Kind == kind })
	if i < 0 {
		return localapi.Resource{}, fmt.Errorf("kind %s has no resource names in localapi.Resources", kind)
	}
	return localapi.Resources[i], nil
}

// printerColumn is a column of `kubectl get`, after the table of
// `marshalctl get`.
type printerColumn struct {
	name     string
	jsonPath string
	// wide shows the column only with -o wide (priority 1), as in
	// marshalctl.
	wide bool
	// description, when empty, is the description of the field at
	// jsonPath.
	description string
}

// ageColumn is the creation time; kubectl shows it as an age.
var ageColumn = printerColumn{name: "Age", jsonPath: ".metadata.creationTimestamp",
	description: "When marshald first saw the object."}

const readyCondition = `.status.conditions[?(@.type=="Ready")]`

// printerColumns are the columns of each kind. marshalctl's composite
// cells (a profile's LIMITS, a host's ENFORCEMENT) become one column per
// field, as a JSONPath names one value.
var printerColumns = map[string][]printerColumn{
	v1alpha1.KindProfile: {
		{name: "Ready", jsonPath: readyCondition + ".status", description: "Whether the profile's slice carries its limits."},
		{name: "Agents", jsonPath: ".status.agents"},
		{name: "CPU Limit", jsonPath: ".spec.limits.cpu_milli"},
		{name: "Memory Limit", jsonPath: ".spec.limits.memory_bytes"},
		{name: "Tasks Limit", jsonPath: ".spec.limits.tasks"},
		ageColumn,
		{name: "Isolation", jsonPath: ".spec.isolation", wide: true},
		{name: "Orphans", jsonPath: ".spec.orphans", wide: true},
		{name: "Slice", jsonPath: ".status.slice", wide: true},
	},
	v1alpha1.KindWorkspace: {
		{name: "Profile", jsonPath: ".spec.profile"},
		{name: "Ready", jsonPath: readyCondition + ".status", description: "Whether the workspace can run executions."},
		{name: "Live", jsonPath: ".status.live"},
		{name: "Max", jsonPath: ".spec.processes.max_live"},
		{name: "Participation", jsonPath: ".spec.resources.participation"},
		ageColumn,
		{name: "Reserved", jsonPath: ".status.reserved", wide: true},
		{name: "Root", jsonPath: ".spec.root", wide: true},
		{name: "Reason", jsonPath: readyCondition + ".message", wide: true, description: "Why the workspace is not Ready."},
	},
	// In a fleet, `kubectl get hosts` is the fleet at a glance: whether
	// each host is Ready, what it can give, what it admits against and
	// holds, its agents and its pressure.
	v1alpha1.KindHost: {
		{name: "Ready", jsonPath: readyCondition + ".status", description: "Whether the host's capacity is known."},
		{name: "CPU", jsonPath: ".status.capacity.cpu_milli"},
		{name: "Memory", jsonPath: ".status.capacity.memory_bytes"},
		{name: "Target CPU", jsonPath: ".status.admission.target.cpu_milli", description: "The CPU admission reserves from now, in thousandths of a core."},
		{name: "Committed CPU", jsonPath: ".status.admission.committed.cpu_milli", description: "The CPU charged attempts hold, in thousandths of a core."},
		{name: "Agents", jsonPath: ".status.agents"},
		{name: "Pressure", jsonPath: ".status.admission.pressure"},
		ageColumn,
		{name: "Tasks", jsonPath: ".status.capacity.tasks", wide: true},
		{name: "Target Memory", jsonPath: ".status.admission.target.memory_bytes", wide: true, description: "The memory admission reserves from now, in bytes."},
		{name: "Committed Memory", jsonPath: ".status.admission.committed.memory_bytes", wide: true, description: "The memory charged attempts hold, in bytes."},
		{name: "Backend", jsonPath: ".status.backend", wide: true},
	},
	v1alpha1.KindConsumer: {
		{name: "Consumer-ID", jsonPath: ".status.consumerID", description: "The consumer's id on DevGuard's wire."},
		{name: "Role", jsonPath: ".spec.role"},
		{name: "Generation", jsonPath: ".spec.generation"},
		{name: "Ready", jsonPath: readyCondition + ".status", description: "Whether the consumer can authenticate."},
		{name: "Max", jsonPath: ".spec.max_instances"},
		ageColumn,
		{name: "Reason", jsonPath: readyCondition + ".message", wide: true, description: "Why the consumer is not Ready."},
	},
}

// crd is the CustomResourceDefinition of kind: its openAPIV3Schema is
// the manifest schema made structural, with the status of the full one.
func (g *generator) crd(kind string, manifest, full defs) (*object, error) {
	res, err := resourceOf(kind)
	if err != nil {
		return nil, err
	}
	schema, err := (&converter{defs: manifest}).convert(manifest[kind])
	if err != nil {
		return nil, err
	}
	status, err := (&converter{defs: full}).convert(full[kind].sub("properties").sub("status"))
	if err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	props := schema.sub("properties")
	// The API server owns metadata; a schema may only restrict name and
	// generateName there, and marshal's name rule is stricter than
	// Kubernetes' own, so it is left to the loader.
	props.set("metadata", obj("type", "object"))
	props.set("status", status)
	// apiVersion, kind and metadata are always there: the API server
	// sets them.
	req := slices.DeleteFunc(schema.strings("required"), func(k string) bool {
		return k == "apiVersion" || k == "kind" || k == "metadata"
	})
	schema.del("required")
	if len(req) > 0 {
		schema.set("required", anyList(req))
	}
	canonical(schema)

	cols, err := columns(kind, schema)
	if err != nil {
		return nil, err
	}
	singular := strings.ToLower(kind)
	names := obj("kind", kind, "listKind", kind+"List", "plural", res.Plural, "singular", singular)
	if short := slices.DeleteFunc(slices.Clone(res.Short), func(s string) bool { return s == singular }); len(short) > 0 {
		names.set("shortNames", anyList(short))
	}
	names.set("categories", []any{"marshal"})
	return obj(
		"apiVersion", "apiextensions.k8s.io/v1",
		"kind", "CustomResourceDefinition",
		"metadata", obj("name", res.Plural+"."+v1alpha1.Group),
		"spec", obj(
			"group", v1alpha1.Group,
			"names", names,
			// Profiles, workspaces and the host belong to one machine,
			// not to a namespace.
			"scope", "Cluster",
			"versions", []any{obj(
				"name", v1alpha1.Version,
				"served", true,
				"storage", true,
				"subresources", obj("status", obj()),
				"additionalPrinterColumns", cols,
				"schema", obj("openAPIV3Schema", schema),
			)},
		),
	), nil
}

// columns returns the printer columns of kind, typed after the fields of
// schema they show.
func columns(kind string, schema *object) ([]any, error) {
	var out []any
	for _, c := range printerColumns[kind] {
		col := obj("name", c.name)
		desc := c.description
		if c.jsonPath == ageColumn.jsonPath {
			col.set("type", "date")
		} else {
			field, err := resolveJSONPath(schema, c.jsonPath)
			if err != nil {
				return nil, fmt.Errorf("column %s: %w", c.name, err)
			}
			col.set("type", columnType(field))
			if desc == "" {
				desc = field.str("description")
			}
		}
		if desc != "" {
			col.set("description", desc)
		}
		if c.wide {
			col.set("priority", json.Number("1"))
		}
		col.set("jsonPath", c.jsonPath)
		out = append(out, col)
	}
	return out, nil
}

func columnType(field *object) string {
	if field.str("type") == "string" && field.str("format") == "date-time" {
		return "date"
	}
	return field.str("type")
}

// resolveJSONPath finds the schema of the field a printer column's
// JSONPath shows: fields joined by dots, a [...] step into the items of a
// list.
func resolveJSONPath(schema *object, jsonPath string) (*object, error) {
	s := schema
	rest, ok := strings.CutPrefix(jsonPath, ".")
	if !ok {
		return nil, fmt.Errorf("%s: not a path from the object: %w", jsonPath, errPrinterColumn)
	}
	for rest != "" {
		name := rest
		if i := strings.IndexAny(rest, ".["); i >= 0 {
			name, rest = rest[:i], rest[i:]
		} else {
			rest = ""
		}
		props := s.sub("properties")
		if props == nil || props.sub(name) == nil {
			return nil, fmt.Errorf("%s: no field %q: %w", jsonPath, name, errPrinterColumn)
		}
		s = props.sub(name)
		if strings.HasPrefix(rest, "[") {
			end := strings.IndexByte(rest, ']')
			if end < 0 || s.str("type") != "array" {
				return nil, fmt.Errorf("%s: %q is not a list: %w", jsonPath, name, errPrinterColumn)
			}
			s, rest = s.sub("items"), rest[end+1:]
		}
		rest = strings.TrimPrefix(rest, ".")
	}
	return s, nil
}

// converter makes a JSON Schema structural, as the API server requires
// of a CustomResourceDefinition (apiextensions.k8s.io/v1).
type converter struct {
	defs  defs
	depth int
}

// maxInt64Number bounds every quantity; a structural schema says it with
// format int64, as Kubernetes reads the numbers of a schema as float64,
// which cannot hold it exactly.
var maxInt64Number = json.Number(strconv.FormatInt(math.MaxInt64, 10))

// convert returns the structural equivalent of schema s:
//   - a $ref is inlined;
//   - a null alternative is dropped: the API server prunes a null that
//     its schema does not allow, which is what the loader makes of one (an
//     omitted field, or the zero value);
//   - const becomes a one-value enum;
//   - additionalProperties false is dropped: the API server prunes unknown
//     fields instead of refusing them;
//   - propertyNames is dropped: an OpenAPI v3 schema cannot constrain map
//     keys;
//   - readOnly is dropped: only the status subresource writes status.
//
// Any other keyword without a structural equivalent is an error, so a new
// keyword in the JSON Schema cannot slip through unconverted.
func (c *converter) convert(s *object) (*object, error) {
	if c.depth > 32 {
		return nil, fmt.Errorf("references nest too deep: %w", errNotStructural)
	}
	c.depth++
	defer func() { c.depth-- }()

	// A reference or a nullable alternative is the base; the keywords
	// beside it (a field's own description) override the base's.
	out := obj()
	if ref := s.str("$ref"); ref != "" {
		def := c.defs[strings.TrimPrefix(ref, "#/$defs/")]
		if def == nil {
			return nil, fmt.Errorf("unresolved $ref %s: %w", ref, errNotStructural)
		}
		base, err := c.convert(def)
		if err != nil {
			return nil, err
		}
		out = base
	}
	if alts, ok := s.get("anyOf").([]any); ok {
		if len(alts) != 2 || !isNullSchema(alts[1]) {
			return nil, fmt.Errorf("anyOf other than one schema or null: %w", errNotStructural)
		}
		a, ok := alts[0].(*object)
		if !ok {
			return nil, fmt.Errorf("anyOf of a non-schema: %w", errNotStructural)
		}
		base, err := c.convert(a)
		if err != nil {
			return nil, err
		}
		out = base
	}
	for _, k := range s.keys {
		v := s.get(k)
		switch k {
		case "$ref", "anyOf", "propertyNames", "readOnly":
		case "description", "format", "pattern", "minLength", "maxLength", "minimum", "required":
			out.set(k, clone(v))
		case "type":
			switch t := v.(type) {
			case string:
				out.set("type", t)
			case []any:
				if len(t) != 2 || t[1] != "null" {
					return nil, fmt.Errorf("type %v: %w", t, errNotStructural)
				}
				out.set("type", t[0])
			}
		case "const":
			out.set("enum", []any{clone(v)})
		case "enum":
			list, _ := v.([]any)
			out.set("enum", slices.DeleteFunc(slices.Clone(list), func(e any) bool { return e == nil }))
		case "maximum":
			if v == maxInt64Number {
				out.set("format", "int64")
			} else {
				out.set("maximum", v)
			}
		case "properties":
			props := obj()
			for _, name := range v.(*object).keys {
				p, err := c.convert(v.(*object).sub(name))
				if err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
				props.set(name, p)
			}
			out.set("properties", props)
		case "additionalProperties":
			switch v := v.(type) {
			case bool:
				if v {
					return nil, fmt.Errorf("additionalProperties true: %w", errNotStructural)
				}
			case *object:
				p, err := c.convert(v)
				if err != nil {
					return nil, fmt.Errorf("values: %w", err)
				}
				out.set(k, p)
			}
		case "items":
			p, err := c.convert(v.(*object))
			if err != nil {
				return nil, fmt.Errorf("items: %w", err)
			}
			out.set(k, p)
		default:
			return nil, fmt.Errorf("keyword %q: %w", k, errNotStructural)
		}
	}
	if out.str("type") == "" {
		return nil, fmt.Errorf("a schema without a type: %w", errNotStructural)
	}
	return out, nil
}

func isNullSchema(v any) bool {
	o, ok := v.(*object)
	return ok && len(o.keys) == 1 && o.str("type") == "null"
}
