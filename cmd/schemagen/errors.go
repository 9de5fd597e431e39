package main

import "errors"

var (
	// errUnknownField is returned when a rule names a field path that
	// the types of its kind do not have, or a kind that is not served.
	errUnknownField = errors.New("no such field")
	// errRuleMismatch is returned when a rule does not fit its field: a
	// pattern on an integer, a minimum on a string, two rules on one
	// field.
	errRuleMismatch = errors.New("rule does not fit the field")
	// errTypeNameClash is returned when two Go types reflect to one
	// schema definition name.
	errTypeNameClash = errors.New("two types share a definition name")
	// errNotStructural is returned when a schema keyword has no
	// equivalent in a Kubernetes structural schema.
	errNotStructural = errors.New("no structural equivalent")
	// errPrinterColumn is returned when a printer column's JSONPath does
	// not lead to a field of the schema.
	errPrinterColumn = errors.New("printer column does not resolve")
)
