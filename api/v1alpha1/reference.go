package v1alpha1

import _ "embed"

// Reference is the manifest reference: every field a manifest may set,
// with its type, meaning, default and bounds. It is generated from the doc
// comments of this package's types (go test ./api/v1alpha1 -run
// TestReference -update) and a test fails when it is stale.
//
//go:embed reference.md
var Reference string
