package main

import (
	"math"

	"k8s.io/apimachinery/pkg/api/validate/content"

	"github.com/marshal-dev/marshal/api/v1alpha1"
)

// rule is what the schema of one field must say beyond what reflecting
// the Go types tells: the checks the loader makes (api/loader and
// v1alpha1's Validate) that a type cannot carry.
type rule struct {
	// required means the field must be present and not null.
	required bool
	// readOnly marks a field only marshald writes: the manifest schema
	// leaves it out, so declaring it is an error, as in the loader.
	readOnly bool
	// constant is the only value allowed.
	constant string
	// enum lists the values allowed.
	enum []string
	// pattern must match a string; notPattern must not.
	pattern, notPattern string
	// minLength and maxLength bound a string's length, when not zero.
	minLength, maxLength int
	// minimum and maximum bound an integer, when set.
	minimum, maximum *int64
	// keys and values constrain the keys and values of a map; items the
	// elements of a list.
	keys, values, items *rule
}

// Patterns, each the regular expression of the loader's check, written in
// the subset both RE2 (Go, Kubernetes) and ECMA-262 (editors) read alike.
const (
	// dns1123Label is k8s.io/apimachinery's IsDNS1123Label, with
	// maxLength 63.
	dns1123Label = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// labelKey is IsQualifiedName: an optional DNS-1123 subdomain prefix
	// and '/', then a name of at most 63 characters. The prefix's own
	// bound of 253 is labelKeyLongPrefix, which must not match.
	labelKey           = `^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`
	labelKeyLongPrefix = `^[^/]{254}`
	// labelValue is IsValidLabelValue, with maxLength 63.
	labelValue = `^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	// devguardIdentifier is v1alpha1.IsIdentifier, with maxLength 128.
	devguardIdentifier = `^[-A-Za-z0-9_.:]+$`
	// sha256Hex is v1alpha1.IsDigest.
	sha256Hex = `^[0-9a-f]{64}$`
	// noNUL refuses a NUL byte, which no path, argument or environment
	// string can carry.
	noNUL = `^[^\x00]*$`
	// absolutePath is filepath.IsAbs on Linux, without NUL.
	absolutePath = `^/[^\x00]*$`
	// rulePath is v1alpha1.ParseRulePath: "/", or "/", "~",
	// "{workspace}" or "{tmp}" followed by '/'-separated elements that
	// are neither empty, "." nor "..", without globs, braces or NUL, with
	// maxLength MaxRulePathLength.
	rulePath    = `^(/|(~|\{workspace\}|\{tmp\})(/` + ruleElement + `)*|(/` + ruleElement + `)+)$`
	ruleElement = `([^/\x00*?\[{}.][^/\x00*?\[{}]*|\.[^/\x00*?\[{}.][^/\x00*?\[{}]*|\.\.[^/\x00*?\[{}]+)`
	// envName is an environment variable name: no '=' and no NUL.
	envName = `^[^=\x00]*$`
	// positiveDuration is a time.ParseDuration string of a positive
	// duration: an optional '+', then number-unit pairs of which at least
	// one has a digit other than 0. Two cases pass it and fail the
	// loader: a duration too long for int64 nanoseconds (about 292
	// years) and a positive fraction of a nanosecond, which parses as 0.
	positiveDuration = `^\+?` + zeroDuration + `*` + nonZeroDuration + anyDuration + `*$`
	zeroDuration     = `((0+(\.0*)?|\.0+)` + durationUnit + `)`
	nonZeroDuration  = `(([0-9]*[1-9][0-9]*(\.[0-9]*)?|[0-9]*\.[0-9]*[1-9][0-9]*)` + durationUnit + `)`
	anyDuration      = `(([0-9]+(\.[0-9]*)?|\.[0-9]+)` + durationUnit + `)`
	durationUnit     = `(ns|us|µs|μs|ms|s|m|h)`

	// hostPattern is v1alpha1.ValidateHostPattern: "*", or an optional
	// "*." and lowercase RFC 1123 labels of at most 63 bytes, the last
	// starting with a letter (which refuses every IPv4 address), with
	// maxLength MaxHostLength.
	hostPattern = `^(\*|(\*\.)?(` + hostLabel + `\.)*[a-z]([-a-z0-9]{0,61}[a-z0-9])?)$`
	hostLabel   = `[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?`
	// cidr is v1alpha1.ValidateCIDR, but for the bits set beyond the
	// prefix length, which no pattern tells: an IPv4 prefix as
	// netip.ParsePrefix reads it (no leading zeros), or an IPv6 one in
	// hexadecimal, in any of the forms '::' allows.
	cidr  = `^(` + ipv4 + `/(3[0-2]|[12]?[0-9])|` + ipv6 + `/(12[0-8]|1[01][0-9]|[1-9]?[0-9]))$`
	ipv4  = `((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])`
	hex16 = `[0-9A-Fa-f]{1,4}`
	ipv6  = `((` + hex16 + `:){7}` + hex16 +
		`|(` + hex16 + `:){1,7}:` +
		`|(` + hex16 + `:){1,6}:` + hex16 +
		`|(` + hex16 + `:){1,5}(:` + hex16 + `){1,2}` +
		`|(` + hex16 + `:){1,4}(:` + hex16 + `){1,3}` +
		`|(` + hex16 + `:){1,3}(:` + hex16 + `){1,4}` +
		`|(` + hex16 + `:){1,2}(:` + hex16 + `){1,5}` +
		`|` + hex16 + `:(:` + hex16 + `){1,6}` +
		`|:((:` + hex16 + `){1,7}|:))`
)

var (
	zero         int64 = 0
	one          int64 = 1
	maxInt64     int64 = math.MaxInt64
	maxInstances int64 = v1alpha1.MaxInstances
	// reserved is a quantity that may be zero: a control reservation,
	// which a workload does not have.
	reserved = rule{minimum: &zero, maximum: &maxInt64}
	// identifier is an identifier of DevGuard's wire; optionalIdentifier
	// one that may be omitted, which the loader reads "" as.
	identifier         = rule{required: true, pattern: devguardIdentifier, maxLength: v1alpha1.MaxIdentifierLength}
	optionalIdentifier = rule{pattern: `^[-A-Za-z0-9_.:]*$`, maxLength: v1alpha1.MaxIdentifierLength}
	// quantity is every amount of a resource: a positive integer that
	// fits in 64 bits.
	quantity = rule{minimum: &one, maximum: &maxInt64}
	// name is an object name, and a reference to one.
	name = rule{pattern: dns1123Label, maxLength: v1alpha1.MaxNameLength}
	// port is a TCP port.
	minPort, maxPort int64 = v1alpha1.MinPort, v1alpha1.MaxPort
	port                   = rule{minimum: &minPort, maximum: &maxPort}
	egressAction           = enumOf(v1alpha1.EgressAllow, v1alpha1.EgressDeny)
)

func enumOf[T ~string](vs ...T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

func withRequired(r rule) rule {
	r.required = true
	return r
}

// rules is the one table of what the generator adds to the reflected
// schema, keyed by KIND.field.path, KIND being a kind or * for every
// kind. A key that names no field is an error, so the table cannot go
// stale when a field is renamed; tests check that every string and
// integer of the manifest schema is constrained, so a new field cannot
// be forgotten.
var rules = map[string]rule{
	"*.apiVersion":                 {required: true, constant: v1alpha1.APIVersion},
	"Host.kind":                    {required: true, constant: v1alpha1.KindHost},
	"Profile.kind":                 {required: true, constant: v1alpha1.KindProfile},
	"Workspace.kind":               {required: true, constant: v1alpha1.KindWorkspace},
	"*.metadata":                   {required: true},
	"*.metadata.name":              withRequired(name),
	"*.metadata.labels":            {keys: &rule{pattern: labelKey, notPattern: labelKeyLongPrefix}, values: &rule{pattern: labelValue, maxLength: content.LabelValueMaxLength}},
	"*.metadata.generation":        {readOnly: true},
	"*.metadata.creationTimestamp": {readOnly: true},
	"*.status":                     {readOnly: true},

	"Profile.spec.isolation":               {enum: enumOf(v1alpha1.IsolationCgroup, v1alpha1.IsolationNetns)},
	"Profile.spec.limits.cpu_milli":        quantity,
	"Profile.spec.limits.memory_bytes":     quantity,
	"Profile.spec.limits.tasks":            quantity,
	"Profile.spec.orphans":                 {enum: enumOf(v1alpha1.OrphansKeep, v1alpha1.OrphansStop)},
	"Profile.spec.egress.default":          {enum: egressAction},
	"Profile.spec.egress.rules.action":     {required: true, enum: egressAction},
	"Profile.spec.egress.rules.hosts":      {items: &rule{pattern: hostPattern, maxLength: v1alpha1.MaxHostLength}},
	"Profile.spec.egress.rules.cidrs":      {items: &rule{pattern: cidr}},
	"Profile.spec.egress.rules.ports":      {items: &port},
	"Profile.spec.filesystem.default":      {enum: enumOf(v1alpha1.FileRead, v1alpha1.FileNone)},
	"Profile.spec.filesystem.rules.access": {required: true, enum: enumOf(v1alpha1.FileNone, v1alpha1.FileRead, v1alpha1.FileWrite)},
	"Profile.spec.filesystem.rules.paths":  {items: &rule{pattern: rulePath, maxLength: v1alpha1.MaxRulePathLength}},
	"Profile.spec.control.run":             {items: &name},
	"Profile.spec.control.allow":           {items: &rule{enum: enumOf(v1alpha1.ControlActions...)}},
	"Profile.spec.control.consumers":       {items: &name},

	"Workspace.spec":                    {required: true},
	"Workspace.spec.root":               {required: true, pattern: absolutePath},
	"Workspace.spec.profile":            withRequired(name),
	"Workspace.spec.network.policy":     {enum: enumOf(v1alpha1.NetworkOpen, v1alpha1.NetworkNone)},
	"Workspace.spec.exec.argv0":         {items: &rule{minLength: 1, pattern: noNUL}},
	"Workspace.spec.exec.env":           {keys: &rule{minLength: 1, pattern: envName}, values: &rule{pattern: noNUL}},
	"Workspace.spec.processes.max_live": quantity,
	"Workspace.spec.resources.participation": {required: true, enum: enumOf(
		v1alpha1.ParticipationRequired, v1alpha1.ParticipationOptional, v1alpha1.ParticipationNone)},
	"Workspace.spec.resources.request.cpu_milli":    quantity,
	"Workspace.spec.resources.request.memory_bytes": quantity,
	"Workspace.spec.resources.request.tasks":        quantity,
	// Every level is a valid minimum for every resource: the host's plan
	// decides by rank at admission.
	"Workspace.spec.resources.request.minimum.cpu":    {enum: enumOf(v1alpha1.Levels...)},
	"Workspace.spec.resources.request.minimum.memory": {enum: enumOf(v1alpha1.Levels...)},
	"Workspace.spec.resources.request.minimum.pids":   {enum: enumOf(v1alpha1.Levels...)},

	"Host.spec.capacity.cpu_milli":               quantity,
	"Host.spec.capacity.memory_bytes":            quantity,
	"Host.spec.capacity.tasks":                   quantity,
	"Host.spec.prepared_ttl":                     {pattern: positiveDuration},
	"Host.spec.egress.unscoped":                  {enum: egressAction},
	"Host.spec.devguard.admin_credential_sha256": {pattern: `^([0-9a-f]{64})?$`},
	"Host.spec.devguard.policy_revision":         optionalIdentifier,

	"Consumer.kind":                   {required: true, constant: v1alpha1.KindConsumer},
	"Consumer.spec":                   {required: true},
	"Consumer.spec.consumer_id":       optionalIdentifier,
	"Consumer.spec.generation":        identifier,
	"Consumer.spec.role":              {required: true, enum: enumOf(v1alpha1.RoleWorkload, v1alpha1.RoleControlService)},
	"Consumer.spec.credential_sha256": {required: true, pattern: sha256Hex},
	"Consumer.spec.max_instances":     {required: true, minimum: &one, maximum: &maxInstances},
	// Whether the reservation is required and positive (a control
	// service) or zero (a workload) depends on the role, which this
	// schema cannot tell: the loader alone checks it.
	"Consumer.spec.control_reservation.cpu_milli":    reserved,
	"Consumer.spec.control_reservation.memory_bytes": reserved,
	"Consumer.spec.control_reservation.tasks":        reserved,
}
