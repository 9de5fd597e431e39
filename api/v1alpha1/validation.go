package v1alpha1

import (
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
)

type validator struct {
	errs ErrorList
}

func (v *validator) add(p Path, format string, args ...any) {
	v.errs = append(v.errs, &FieldError{Path: p, Message: fmt.Sprintf(format, args...)})
}

func (v *validator) required(p Path, value string) bool {
	if value == "" {
		v.add(p, "required")
		return false
	}
	return true
}

func (v *validator) positive(p Path, q *int64) {
	if q != nil && *q <= 0 {
		v.add(p, "must be a positive integer, got %d", *q)
	}
}

// enum checks that value, when set, is one of allowed.
func enum[T ~string](v *validator, p Path, value T, allowed ...T) {
	if value == "" {
		return
	}
	for _, a := range allowed {
		if value == a {
			return
		}
	}
	quoted := make([]string, len(allowed))
	for i, a := range allowed {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	v.add(p, "must be one of %s, got %q", strings.Join(quoted, ", "), value)
}

// ValidateName reports what is wrong with an object name, or nil.
func ValidateName(name string) []string {
	if name == "" {
		return []string{"required"}
	}
	return isDNS1123Label(name)
}

func (v *validator) meta(m *ObjectMeta) {
	p := NewPath("metadata")
	for _, msg := range ValidateName(m.Name) {
		v.add(p.Child("name"), "%s", msg)
	}
	for _, k := range slices.Sorted(maps.Keys(m.Labels)) {
		val := m.Labels[k]
		for _, msg := range isQualifiedName(k) {
			v.add(p.Child("labels").Key(k), "key: %s", msg)
		}
		for _, msg := range isLabelValue(val) {
			v.add(p.Child("labels").Key(k), "%s", msg)
		}
	}
	if m.Generation != 0 {
		v.add(p.Child("generation"), "is set by marshald and cannot be declared")
	}
	if !m.CreationTimestamp.IsZero() {
		v.add(p.Child("creationTimestamp"), "is set by marshald and cannot be declared")
	}
}

// status refuses a declared status: only marshald writes it.
func (v *validator) status(declared bool) {
	if declared {
		v.add(NewPath("status"), "is written by marshald and cannot be declared")
	}
}

// Validate checks the profile as written.
func (p *Profile) Validate() ErrorList {
	var v validator
	v.meta(&p.Metadata)
	spec := NewPath("spec")
	enum(&v, spec.Child("isolation"), p.Spec.Isolation, IsolationCgroup, IsolationNetns)
	enum(&v, spec.Child("orphans"), p.Spec.Orphans, OrphansKeep, OrphansStop)
	if l := p.Spec.Limits; l != nil {
		lp := spec.Child("limits")
		v.positive(lp.Child("cpu_milli"), l.CPUMilli)
		v.positive(lp.Child("memory_bytes"), l.MemoryBytes)
		v.positive(lp.Child("tasks"), l.Tasks)
	}
	if e := p.Spec.Egress; e != nil {
		v.egress(spec.Child("egress"), e)
	}
	if fs := p.Spec.Filesystem; fs != nil {
		v.filesystem(spec.Child("filesystem"), fs)
	}
	if c := p.Spec.Control; c != nil {
		v.control(spec.Child("control"), c)
	}
	v.status(!reflect.ValueOf(p.Status).IsZero())
	return v.errs
}

// Validate checks the workspace as written.
func (w *Workspace) Validate() ErrorList {
	var v validator
	v.meta(&w.Metadata)
	spec := NewPath("spec")
	s := &w.Spec
	if v.required(spec.Child("root"), s.Root) {
		switch {
		case strings.ContainsRune(s.Root, 0):
			v.add(spec.Child("root"), "must not contain a NUL byte")
		case !filepath.IsAbs(s.Root):
			v.add(spec.Child("root"), "must be an absolute path, got %q", s.Root)
		}
	}
	if v.required(spec.Child("profile"), s.Profile) {
		for _, msg := range isDNS1123Label(s.Profile) {
			v.add(spec.Child("profile"), "must be a profile name: %s", msg)
		}
	}
	enum(&v, spec.Child("network", "policy"), s.Network.Policy, NetworkOpen, NetworkNone)
	ep := spec.Child("exec")
	for i, a := range s.Exec.Argv0 {
		switch {
		case a == "":
			v.add(ep.Child("argv0").Index(i), "must not be empty")
		case strings.ContainsRune(a, 0):
			v.add(ep.Child("argv0").Index(i), "must not contain a NUL byte")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.Exec.Env)) {
		val := s.Exec.Env[k]
		switch {
		case k == "":
			v.add(ep.Child("env").Key(k), "variable name must not be empty")
		case strings.ContainsAny(k, "=\x00"):
			v.add(ep.Child("env").Key(k), "variable name must not contain '=' or NUL")
		case strings.ContainsRune(val, 0):
			v.add(ep.Child("env").Key(k), "value must not contain a NUL byte")
		}
	}
	v.positive(spec.Child("processes", "max_live"), s.Processes.MaxLive)
	if r := s.Resources; r != nil {
		rp := spec.Child("resources")
		if v.required(rp.Child("participation"), string(r.Participation)) {
			enum(&v, rp.Child("participation"), r.Participation,
				ParticipationRequired, ParticipationOptional, ParticipationNone)
		}
		if q := r.Request; q != nil {
			qp := rp.Child("request")
			v.positive(qp.Child("cpu_milli"), q.CPUMilli)
			v.positive(qp.Child("memory_bytes"), q.MemoryBytes)
			v.positive(qp.Child("tasks"), q.Tasks)
			if m := q.Minimum; m != nil {
				mp := qp.Child("minimum")
				// Every level is a valid minimum for every resource: the
				// host's plan decides by rank at admission.
				enum(&v, mp.Child("cpu"), m.CPU, Levels...)
				enum(&v, mp.Child("memory"), m.Memory, Levels...)
				enum(&v, mp.Child("pids"), m.PIDs, Levels...)
			}
		}
	}
	v.status(!reflect.ValueOf(w.Status).IsZero())
	return v.errs
}

// Validate checks the host as written.
func (h *Host) Validate() ErrorList {
	var v validator
	v.meta(&h.Metadata)
	spec := NewPath("spec")
	if c := h.Spec.Capacity; c != nil {
		cp := spec.Child("capacity")
		v.positive(cp.Child("cpu_milli"), c.CPUMilli)
		v.positive(cp.Child("memory_bytes"), c.MemoryBytes)
		v.positive(cp.Child("tasks"), c.Tasks)
	}
	if d := h.Spec.PreparedTTL; d != nil && d.Duration <= 0 {
		v.add(spec.Child("prepared_ttl"), "must be a positive duration, got %s", d.Duration)
	}
	if e := h.Spec.Egress; e != nil {
		enum(&v, spec.Child("egress", "unscoped"), e.Unscoped, EgressDeny, EgressAllow)
	}
	if dg := h.Spec.DevGuard; dg != nil {
		dp := spec.Child("devguard")
		if dg.AdminCredentialSHA256 != "" {
			v.digest(dp.Child("admin_credential_sha256"), dg.AdminCredentialSHA256)
		}
		if dg.PolicyRevision != "" {
			v.identifier(dp.Child("policy_revision"), dg.PolicyRevision)
		}
	}
	v.status(!reflect.ValueOf(h.Status).IsZero())
	return v.errs
}

// MaxInstances bounds a Consumer's max_instances.
const MaxInstances = 64

// Validate checks the consumer as written.
func (c *Consumer) Validate() ErrorList {
	var v validator
	v.meta(&c.Metadata)
	spec := NewPath("spec")
	s := &c.Spec
	if s.ConsumerID != "" {
		v.identifier(spec.Child("consumer_id"), s.ConsumerID)
	}
	if v.required(spec.Child("generation"), s.Generation) {
		v.identifier(spec.Child("generation"), s.Generation)
	}
	if v.required(spec.Child("role"), string(s.Role)) {
		enum(&v, spec.Child("role"), s.Role, RoleWorkload, RoleControlService)
	}
	if v.required(spec.Child("credential_sha256"), s.CredentialSHA256) {
		v.digest(spec.Child("credential_sha256"), s.CredentialSHA256)
	}
	switch n := s.MaxInstances; {
	case n == nil:
		v.add(spec.Child("max_instances"), "required")
	case *n < 1 || *n > MaxInstances:
		v.add(spec.Child("max_instances"), "must be between 1 and %d, got %d", MaxInstances, *n)
	}
	rp := spec.Child("control_reservation")
	r := s.ControlReservation
	quantities := func(r *ControlReservation) []struct {
		name string
		q    *int64
	} {
		return []struct {
			name string
			q    *int64
		}{{"cpu_milli", r.CPUMilli}, {"memory_bytes", r.MemoryBytes}, {"tasks", r.Tasks}}
	}
	switch {
	case s.Role == RoleControlService && r == nil:
		v.add(rp, "required for a control_service")
	case s.Role == RoleControlService:
		for _, f := range quantities(r) {
			switch {
			case f.q == nil:
				v.add(rp.Child(f.name), "required for a control_service")
			case *f.q <= 0:
				v.add(rp.Child(f.name), "must be a positive integer for a control_service, got %d", *f.q)
			}
		}
	case r != nil:
		for _, f := range quantities(r) {
			switch {
			case f.q == nil:
			case *f.q < 0:
				v.add(rp.Child(f.name), "must be a non-negative integer, got %d", *f.q)
			case *f.q > 0 && s.Role == RoleWorkload:
				v.add(rp.Child(f.name), "must be 0 for a workload, which reserves nothing, got %d", *f.q)
			}
		}
	}
	v.status(!reflect.ValueOf(c.Status).IsZero())
	return v.errs
}

// digest checks a SHA-256 written as 64 lowercase hex digits. The value
// is never repeated: a secret pasted in by mistake stays out of messages.
func (v *validator) digest(p Path, s string) {
	switch {
	case IsDigest(s):
	case len(s) != 64:
		v.add(p, "must be a SHA-256 digest: 64 lowercase hex digits, got %d characters", len(s))
	default:
		v.add(p, "must be a SHA-256 digest: 64 lowercase hex digits, got other characters than 0-9 and a-f")
	}
}

// identifier checks an identifier of DevGuard's wire.
func (v *validator) identifier(p Path, s string) {
	if !IsIdentifier(s) {
		v.add(p, "must be 1 to %d characters of A-Z, a-z, 0-9, '-', '_', '.' and ':', got %q", MaxIdentifierLength, s)
	}
}
