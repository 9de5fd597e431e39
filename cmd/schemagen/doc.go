// Command schemagen generates, from the Go types of api/v1alpha1, the JSON
// Schema (draft 2020-12) of every kind a manifest declares, a combined
// schema that accepts any of them (for editors, through the
// yaml-language-server modeline of the example manifests) and a
// Kubernetes CustomResourceDefinition per kind.
//
// The schemas are as strict as the loader: the reflector reads the types'
// json tags and doc comments, and one table (rules.go), keyed by field
// path, adds what the loader checks and a type cannot say (required
// fields, enums, patterns, bounds). The CRDs are the same schemas made
// structural. `make generate` runs it; the tests in this directory fail
// when the committed files are stale, validate the examples with a real
// JSON Schema validator, compare the schema's verdict with the loader's on
// generated documents and check that each CRD is structural.
//
// It is not a validator: marshal loads manifests with api/loader, whose
// messages name file, line and field. The schemas serve editors and
// Kubernetes tooling.
package main
