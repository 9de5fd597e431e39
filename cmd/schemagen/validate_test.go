package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"sigs.k8s.io/yaml"

	"github.com/marshal-dev/marshal/api/loader"
	"github.com/marshal-dev/marshal/api/v1alpha1"
)

// schemas are the committed JSON Schemas, compiled by a real validator.
type schemas struct {
	byKind   map[string]*jsonschema.Schema
	combined *jsonschema.Schema
}

func compileSchemas(t testing.TB) schemas {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	compile := func(name string) *jsonschema.Schema {
		abs, err := filepath.Abs(filepath.Join(moduleRoot, outDir, name))
		if err != nil {
			t.Fatal(err)
		}
		s, err := c.Compile(abs)
		if err != nil {
			t.Fatalf("compiling %s: %v", name, err)
		}
		return s
	}
	s := schemas{byKind: map[string]*jsonschema.Schema{}, combined: compile(combinedFile)}
	for _, kind := range v1alpha1.Kinds {
		s.byKind[kind] = compile(kindFile(kind))
	}
	return s
}

// document is one YAML document of a manifest file, as JSON.
type document struct {
	line int // where it starts, for messages
	json []byte
	kind string
}

// documents splits a manifest file into its documents the way kubectl
// does and converts each with sigs.k8s.io/yaml, skipping empty ones. A
// .json file is one document, read as JSON.
func documents(t *testing.T, name string, data []byte) []document {
	t.Helper()
	var docs []document
	add := func(line int, j []byte) {
		var head struct {
			Kind any `json:"kind"`
		}
		if string(bytes.TrimSpace(j)) == "null" {
			return
		}
		if err := json.Unmarshal(j, &head); err != nil {
			t.Fatalf("%s:%d: %v", name, line, err)
		}
		kind, _ := head.Kind.(string)
		docs = append(docs, document{line: line, json: j, kind: kind})
	}
	if strings.HasSuffix(name, ".json") {
		add(1, data)
		return docs
	}
	// A line of "---", maybe followed by a comment, separates documents,
	// as in kubectl's reader.
	start, lines := 1, strings.SplitAfter(string(data), "\n")
	var chunk strings.Builder
	flush := func() {
		j, err := yaml.YAMLToJSON([]byte(chunk.String()))
		if err != nil {
			t.Fatalf("%s:%d: %v", name, start, err)
		}
		add(start, j)
		chunk.Reset()
	}
	for i, l := range lines {
		if rest, ok := strings.CutPrefix(l, "---"); ok {
			if rest = strings.TrimSpace(rest); rest == "" || strings.HasPrefix(rest, "#") {
				flush()
				start = i + 2
				continue
			}
		}
		chunk.WriteString(l)
	}
	flush()
	return docs
}

// tester is what both *testing.T and *rapid.T give.
type tester interface {
	Helper()
	Fatal(args ...any)
}

func instance(t tester, j []byte) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// validate checks one document against its kind's schema and the
// combined one, and returns their errors; the kind's is nil when the
// document's kind is not served.
func (s schemas) validate(t tester, d document) (kindErr, combinedErr error) {
	t.Helper()
	v := instance(t, d.json)
	if k := s.byKind[d.kind]; k != nil {
		kindErr = k.Validate(v)
	}
	return kindErr, s.combined.Validate(v)
}

// testName names a subtest after a file: its base name without the
// extension.
func testName(file string) string {
	base := filepath.Base(file)
	return strings.TrimSuffix(base, filepath.Ext(base))
}

// modeline is the yaml-language-server comment that opens every example
// manifest, naming the combined schema relative to the manifest.
func modeline(t *testing.T) string {
	t.Helper()
	rel, err := filepath.Rel("manifests", filepath.FromSlash(outDir))
	if err != nil {
		t.Fatal(err)
	}
	return "# yaml-language-server: $schema=./" + filepath.ToSlash(filepath.Join(rel, combinedFile))
}

func TestExamplesValidate(t *testing.T) {
	s := compileSchemas(t)
	files, err := filepath.Glob(filepath.Join(moduleRoot, "manifests", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no example manifests in manifests/")
	}
	want := modeline(t)
	for _, f := range files {
		t.Run(testName(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(string(data), "\n")
			if first != want {
				t.Errorf("first line = %q, want the modeline %q", first, want)
			}
			target := filepath.Join(filepath.Dir(f), strings.TrimPrefix(want, "# yaml-language-server: $schema="))
			if _, err := os.Stat(target); err != nil {
				t.Errorf("the modeline names a schema that is not there: %v", err)
			}
			if lf := loader.LoadBytes(f, data); len(lf.Errors) > 0 {
				t.Errorf("the loader refuses the example: %v", lf.Errors)
			}
			docs := documents(t, f, data)
			if len(docs) == 0 {
				t.Fatal("no documents")
			}
			for _, d := range docs {
				kindErr, combinedErr := s.validate(t, d)
				if s.byKind[d.kind] == nil {
					t.Errorf("document at line %d: kind %q has no schema", d.line, d.kind)
				}
				if kindErr != nil {
					t.Errorf("document at line %d against %s: %v", d.line, kindFile(d.kind), kindErr)
				}
				if combinedErr != nil {
					t.Errorf("document at line %d against %s: %v", d.line, combinedFile, combinedErr)
				}
			}
		})
	}
}

// TestSchemaAcceptsTheLoaderGoodFiles validates the loader's own good
// test files, which exercise its syntax: flow style, anchors, nulls,
// underscores and hex in integers, JSON.
func TestSchemaAcceptsTheLoaderGoodFiles(t *testing.T) {
	s := compileSchemas(t)
	files, err := filepath.Glob(filepath.Join(moduleRoot, "api", "loader", "testdata", "good*"))
	if err != nil {
		t.Fatal(err)
	}
	files = slices.DeleteFunc(files, func(f string) bool { return strings.HasSuffix(f, ".golden") })
	if len(files) < 5 {
		t.Fatalf("found only %d good files in api/loader/testdata", len(files))
	}
	for _, f := range files {
		t.Run(testName(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if lf := loader.LoadBytes(f, data); len(lf.Errors) > 0 {
				t.Fatalf("the loader refuses it: %v", lf.Errors)
			}
			for _, d := range documents(t, f, data) {
				kindErr, combinedErr := s.validate(t, d)
				if err := errors.Join(kindErr, combinedErr); err != nil {
					t.Errorf("document at line %d: %v", d.line, err)
				}
			}
		})
	}
}

// errorLocations lists where the leaf errors of err are, as
// /spec/limits/cpu_milli ("" for the document). A refused map key is
// "key NAME": the validator (v6.0.3) reuses one buffer for the location
// of every such error, so the key, not the location, says which it is.
func errorLocations(err error) []string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil
	}
	var out []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if pn, ok := e.ErrorKind.(*kind.PropertyNames); ok {
			out = append(out, "key "+pn.Property)
			return
		}
		if len(e.Causes) == 0 {
			loc := ""
			for _, tok := range e.InstanceLocation {
				loc += "/" + tok
			}
			out = append(out, loc)
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return out
}

const (
	profileHead   = "apiVersion: marshal.dev/v1alpha1\nkind: Profile\nmetadata: {name: coder}\n"
	workspaceHead = "apiVersion: marshal.dev/v1alpha1\nkind: Workspace\nmetadata: {name: webapp}\n"
	hostHead      = "apiVersion: marshal.dev/v1alpha1\nkind: Host\nmetadata: {name: local}\n"
	consumerHead  = "apiVersion: marshal.dev/v1alpha1\nkind: Consumer\nmetadata: {name: codespace}\n"
	workspaceSpec = workspaceHead + "spec:\n  root: /srv/webapp\n  profile: coder\n"
	digestA       = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
)

// TestSchemaRejectsWhatTheLoaderRejects checks, for each document, that
// the loader refuses it and that both schemas refuse it at the field the
// loader names.
func TestSchemaRejectsWhatTheLoaderRejects(t *testing.T) {
	s := compileSchemas(t)
	tests := []struct {
		name string
		doc  string
		// at is where a validation error must be: the field, or the
		// object that lacks a key or has one too many.
		at string
	}{
		{"unknown_key", profileHead + "spec: {isolatoin: cgroup}\n", "/spec"},
		{"unknown_top_level_key", profileHead + "specs: {}\n", ""},
		{"unknown_metadata_key", "apiVersion: marshal.dev/v1alpha1\nkind: Host\nmetadata: {name: local, namespace: x}\n", "/metadata"},
		{"wrong_type_string_for_integer", profileHead + "spec: {limits: {cpu_milli: \"2000\"}}\n", "/spec/limits/cpu_milli"},
		{"wrong_type_integer_for_string", workspaceHead + "spec: {root: 123, profile: coder}\n", "/spec/root"},
		{"wrong_type_mapping_for_list", workspaceSpec + "  exec: {argv0: {sh: true}}\n", "/spec/exec/argv0"},
		{"wrong_type_string_for_boolean", workspaceSpec + "  exec: {allow: \"yes\"}\n", "/spec/exec/allow"},
		{"wrong_type_fraction_for_integer", hostHead + "spec: {capacity: {tasks: 1.5}}\n", "/spec/capacity/tasks"},
		{"negative_quantity", workspaceSpec + "  resources: {participation: required, request: {cpu_milli: -5}}\n", "/spec/resources/request/cpu_milli"},
		{"zero_quantity", hostHead + "spec: {capacity: {tasks: 0}}\n", "/spec/capacity/tasks"},
		{"zero_max_live", workspaceSpec + "  processes: {max_live: 0}\n", "/spec/processes/max_live"},
		{"quantity_beyond_int64", hostHead + "spec: {capacity: {memory_bytes: 9223372036854775808}}\n", "/spec/capacity/memory_bytes"},
		{"bad_isolation", profileHead + "spec: {isolation: vm}\n", "/spec/isolation"},
		{"bad_orphans", profileHead + "spec: {orphans: kill}\n", "/spec/orphans"},
		{"bad_network_policy", workspaceSpec + "  network: {policy: closed}\n", "/spec/network/policy"},
		{"bad_participation", workspaceSpec + "  resources: {participation: sometimes}\n", "/spec/resources/participation"},
		{"unknown_memory_level", workspaceSpec + "  resources: {participation: optional, request: {minimum: {memory: strict}}}\n", "/spec/resources/request/minimum/memory"},
		{"consumer_digest_uppercase", consumerHead + "spec: {generation: g1, role: workload, credential_sha256: " + strings.ToUpper(digestA) + ", max_instances: 1}\n", "/spec/credential_sha256"},
		{"consumer_without_generation", consumerHead + "spec: {role: workload, credential_sha256: " + digestA + ", max_instances: 1}\n", "/spec"},
		{"consumer_secret_field", consumerHead + "spec: {generation: g1, role: workload, credential_sha256: " + digestA + ", max_instances: 1, secret: x}\n", "/spec"},
		{"bad_cpu_level", workspaceSpec + "  resources: {participation: optional, request: {minimum: {cpu: strict}}}\n", "/spec/resources/request/minimum/cpu"},
		{"relative_root", workspaceHead + "spec: {root: src/webapp, profile: coder}\n", "/spec/root"},
		{"root_with_nul", workspaceHead + "spec: {root: \"/srv/a\\0b\", profile: coder}\n", "/spec/root"},
		{"missing_root", workspaceHead + "spec: {profile: coder}\n", "/spec"},
		{"null_root", workspaceHead + "spec: {root: null, profile: coder}\n", "/spec/root"},
		{"missing_profile", workspaceHead + "spec: {root: /srv/webapp}\n", "/spec"},
		{"profile_not_a_name", workspaceHead + "spec: {root: /srv/webapp, profile: My Profile}\n", "/spec/profile"},
		{"missing_spec_of_workspace", workspaceHead, ""},
		{"missing_participation", workspaceSpec + "  resources: {request: {tasks: 4}}\n", "/spec/resources"},
		{"null_participation", workspaceSpec + "  resources: {participation: null}\n", "/spec/resources/participation"},
		{"empty_argv0_entry", workspaceSpec + "  exec: {argv0: [sh, \"\"]}\n", "/spec/exec/argv0/1"},
		{"null_argv0_entry", workspaceSpec + "  exec: {argv0: [sh, null]}\n", "/spec/exec/argv0/1"},
		{"env_name_with_equals", workspaceSpec + "  exec: {env: {\"A=B\": x}}\n", "key A=B"},
		{"empty_env_name", workspaceSpec + "  exec: {env: {\"\": x}}\n", "key "},
		{"env_value_with_nul", workspaceSpec + "  exec: {env: {A: \"x\\0y\"}}\n", "/spec/exec/env/A"},
		{"declared_status", profileHead + "status: {observedGeneration: 1}\n", ""},
		{"declared_null_status", profileHead + "status: null\n", ""},
		{"declared_generation", "apiVersion: marshal.dev/v1alpha1\nkind: Profile\nmetadata: {name: coder, generation: 3}\n", "/metadata"},
		{"declared_creation_timestamp", "apiVersion: marshal.dev/v1alpha1\nkind: Profile\nmetadata: {name: coder, creationTimestamp: \"2024-01-01T00:00:00Z\"}\n", "/metadata"},
		{"name_too_long", "apiVersion: marshal.dev/v1alpha1\nkind: Profile\nmetadata: {name: " + strings.Repeat("a", 64) + "}\n", "/metadata/name"},
		{"name_uppercase", "apiVersion: marshal.dev/v1alpha1\nkind: Profile\nmetadata: {name: Coder}\n", "/metadata/name"},
		{"name_ends_with_dash", "apiVersion: marshal.dev/v1alpha1\nkind: Profile\nmetadata: {name: coder-}\n", "/metadata/name"},
		{"missing_name", "apiVersion: marshal.dev/v1alpha1\nkind: Profile\nmetadata: {labels: {team: a}}\n", "/metadata"},
		{"missing_metadata", "apiVersion: marshal.dev/v1alpha1\nkind: Profile\nspec: {}\n", ""},
		{"null_metadata", "apiVersion: marshal.dev/v1alpha1\nkind: Profile\nmetadata: null\n", "/metadata"},
		{"bad_label_key", "apiVersion: marshal.dev/v1alpha1\nkind: Profile\nmetadata: {name: coder, labels: {-team: a}}\n", "key -team"},
		{"label_key_prefix_too_long", "apiVersion: marshal.dev/v1alpha1\nkind: Profile\nmetadata: {name: coder, labels: {" + strings.Repeat("a", 254) + "/team: a}}\n", "key " + strings.Repeat("a", 254) + "/team"},
		{"bad_label_value", "apiVersion: marshal.dev/v1alpha1\nkind: Profile\nmetadata: {name: coder, labels: {team: a b}}\n", "/metadata/labels/team"},
		{"label_value_too_long", "apiVersion: marshal.dev/v1alpha1\nkind: Profile\nmetadata: {name: coder, labels: {team: " + strings.Repeat("a", 64) + "}}\n", "/metadata/labels/team"},
		{"duration_in_words", hostHead + "spec: {prepared_ttl: soon}\n", "/spec/prepared_ttl"},
		{"duration_without_unit", hostHead + "spec: {prepared_ttl: \"5\"}\n", "/spec/prepared_ttl"},
		{"duration_as_integer", hostHead + "spec: {prepared_ttl: 5}\n", "/spec/prepared_ttl"},
		{"zero_duration", hostHead + "spec: {prepared_ttl: 0s}\n", "/spec/prepared_ttl"},
		{"negative_duration", hostHead + "spec: {prepared_ttl: -5s}\n", "/spec/prepared_ttl"},
		{"wrong_api_version", "apiVersion: marshal.dev/v1\nkind: Host\nmetadata: {name: local}\n", "/apiVersion"},
		{"missing_api_version", "kind: Host\nmetadata: {name: local}\n", ""},
		{"unknown_kind", "apiVersion: marshal.dev/v1alpha1\nkind: Agent\nmetadata: {name: a}\n", "/kind"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if lf := loader.LoadBytes(tc.name+".yaml", []byte(tc.doc)); len(lf.Errors) == 0 {
				t.Fatalf("the loader accepts the case; it tests nothing:\n%s", tc.doc)
			}
			docs := documents(t, tc.name, []byte(tc.doc))
			if len(docs) != 1 {
				t.Fatalf("%d documents, want 1", len(docs))
			}
			kindErr, combinedErr := s.validate(t, docs[0])
			checks := []struct {
				schema string
				err    error
			}{{combinedFile, combinedErr}}
			if s.byKind[docs[0].kind] != nil {
				checks = append(checks, struct {
					schema string
					err    error
				}{kindFile(docs[0].kind), kindErr})
			}
			for _, c := range checks {
				if c.err == nil {
					t.Errorf("%s accepts it", c.schema)
					continue
				}
				if locs := errorLocations(c.err); !slices.Contains(locs, tc.at) {
					t.Errorf("%s refuses it at %q, want at %q: %v", c.schema, locs, tc.at, c.err)
				}
			}
		})
	}
}

// TestSchemaAcceptsNullsAndEmptiesLikeTheLoader pins the loader's reading
// of null, empty collections and "" in optional fields.
func TestSchemaAcceptsNullsAndEmptiesLikeTheLoader(t *testing.T) {
	s := compileSchemas(t)
	tests := []struct {
		name, doc string
	}{
		{"null_spec", profileHead + "spec: null\n"},
		{"no_spec", profileHead},
		{"null_limits", profileHead + "spec: {limits: null, orphans: ~}\n"},
		{"empty_enum", profileHead + "spec: {isolation: \"\"}\n"},
		{"null_labels", "apiVersion: marshal.dev/v1alpha1\nkind: Host\nmetadata: {name: local, labels: null}\n"},
		{"null_label_value", "apiVersion: marshal.dev/v1alpha1\nkind: Host\nmetadata: {name: local, labels: {team: null, empty: \"\"}}\n"},
		{"null_env_value", workspaceSpec + "  exec: {env: {A: null}, argv0: [], allow: null}\n"},
		{"null_request_fields", workspaceSpec + "  resources: {participation: none, request: {cpu_milli: null, minimum: {cpu: null}}}\n"},
		{"null_duration", hostHead + "spec: {prepared_ttl: null, capacity: {}}\n"},
		{"largest_quantity", hostHead + "spec: {capacity: {memory_bytes: 9223372036854775807}}\n"},
		{"positive_duration_forms", hostHead + "spec: {prepared_ttl: +1h0m0.5s}\n"},
		{"label_key_with_prefix", "apiVersion: marshal.dev/v1alpha1\nkind: Host\nmetadata: {name: local, labels: {" + strings.Repeat("a", 253) + "/Team_1: x}}\n"},
		{"longest_name", "apiVersion: marshal.dev/v1alpha1\nkind: Host\nmetadata: {name: " + strings.Repeat("a", 63) + "}\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if lf := loader.LoadBytes(tc.name+".yaml", []byte(tc.doc)); len(lf.Errors) > 0 {
				t.Fatalf("the loader refuses it: %v", lf.Errors)
			}
			docs := documents(t, tc.name, []byte(tc.doc))
			kindErr, combinedErr := s.validate(t, docs[0])
			if err := errors.Join(kindErr, combinedErr); err != nil {
				t.Errorf("refused: %v", err)
			}
		})
	}
}
