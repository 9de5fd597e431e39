package v1alpha1

import (
	"path/filepath"
	"time"
)

// Defaults of optional fields.
const (
	DefaultRequestCPUMilli    int64 = 250
	DefaultRequestMemoryBytes int64 = 256 << 20
	DefaultRequestTasks       int64 = 32
	DefaultMaxLive            int64 = 8
	DefaultPreparedTTL              = 5 * time.Second
	// DefaultPolicyRevision is the policy revision attempts record when
	// the Host names none.
	DefaultPolicyRevision = "marshal"
)

func int64Default(p **int64, v int64) {
	if *p == nil {
		*p = &v
	}
}

func levelDefault(l *Level) {
	if *l == "" {
		*l = LevelAccounted
	}
}

// Default fills omitted fields of the profile.
func (p *Profile) Default() {
	if p.Spec.Isolation == "" {
		p.Spec.Isolation = IsolationCgroup
	}
	if p.Spec.Orphans == "" {
		p.Spec.Orphans = OrphansKeep
	}
	if e := p.Spec.Egress; e != nil && e.Default == "" {
		e.Default = EgressDeny
	}
	if fs := p.Spec.Filesystem; fs != nil && fs.Default == "" {
		fs.Default = FileRead
	}
}

// Default fills omitted fields of the workspace. A root with redundant
// separators or dot elements is cleaned.
func (w *Workspace) Default() {
	s := &w.Spec
	if s.Root != "" {
		s.Root = filepath.Clean(s.Root)
	}
	if s.Network.Policy == "" {
		s.Network.Policy = NetworkOpen
	}
	if s.Exec.Allow == nil {
		allow := true
		s.Exec.Allow = &allow
	}
	int64Default(&s.Processes.MaxLive, DefaultMaxLive)
	if s.Resources == nil {
		s.Resources = &ResourcesSpec{Participation: ParticipationNone}
	}
	if s.Resources.Request == nil {
		s.Resources.Request = &ResourceRequest{}
	}
	r := s.Resources.Request
	int64Default(&r.CPUMilli, DefaultRequestCPUMilli)
	int64Default(&r.MemoryBytes, DefaultRequestMemoryBytes)
	int64Default(&r.Tasks, DefaultRequestTasks)
	if r.Minimum == nil {
		r.Minimum = &MinimumLevels{}
	}
	levelDefault(&r.Minimum.CPU)
	levelDefault(&r.Minimum.Memory)
	levelDefault(&r.Minimum.PIDs)
}

// Default fills omitted fields of the host. Omitted capacity stays omitted:
// it is measured from the machine, not defaulted.
func (h *Host) Default() {
	if h.Spec.PreparedTTL == nil {
		h.Spec.PreparedTTL = &Duration{DefaultPreparedTTL}
	}
	if e := h.Spec.Egress; e != nil && e.Unscoped == "" {
		e.Unscoped = EgressDeny
	}
	if h.Spec.DevGuard != nil && h.Spec.DevGuard.PolicyRevision == "" {
		h.Spec.DevGuard.PolicyRevision = DefaultPolicyRevision
	}
}

// PolicyRevision returns the policy revision the host declares, else
// DefaultPolicyRevision; h may be nil (no Host declared).
func (h *Host) PolicyRevision() string {
	if h != nil && h.Spec.DevGuard != nil && h.Spec.DevGuard.PolicyRevision != "" {
		return h.Spec.DevGuard.PolicyRevision
	}
	return DefaultPolicyRevision
}

// Default fills omitted fields of the consumer: a reservation omitted, or
// a quantity of it, is zero.
func (c *Consumer) Default() {
	if c.Spec.ControlReservation == nil {
		c.Spec.ControlReservation = &ControlReservation{}
	}
	r := c.Spec.ControlReservation
	int64Default(&r.CPUMilli, 0)
	int64Default(&r.MemoryBytes, 0)
	int64Default(&r.Tasks, 0)
}

// ID returns the consumer's id on DevGuard's wire: spec.consumer_id, else
// the name.
func (c *Consumer) ID() string {
	if c.Spec.ConsumerID != "" {
		return c.Spec.ConsumerID
	}
	return c.Metadata.Name
}
