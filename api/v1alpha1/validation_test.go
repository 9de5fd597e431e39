package v1alpha1

import (
	"strings"
	"testing"
	"time"
)

func ptr[T any](v T) *T { return &v }

func validConsumer() *Consumer {
	return &Consumer{
		TypeMeta: TypeMeta{APIVersion: APIVersion, Kind: KindConsumer},
		Metadata: ObjectMeta{Name: "codespace"},
		Spec: ConsumerSpec{
			Generation: "g1", Role: RoleControlService,
			CredentialSHA256: strings.Repeat("ab", 32), MaxInstances: ptr(int64(2)),
			ControlReservation: &ControlReservation{CPUMilli: ptr(int64(250)), MemoryBytes: ptr(int64(128 << 20)), Tasks: ptr(int64(16))},
		},
	}
}

func validWorkspace() *Workspace {
	return &Workspace{
		TypeMeta: TypeMeta{APIVersion: APIVersion, Kind: KindWorkspace},
		Metadata: ObjectMeta{Name: "webapp"},
		Spec:     WorkspaceSpec{Root: "/src/webapp", Profile: "coder"},
	}
}

// errorStrings renders errs as "path: message" lines for comparison.
func errorStrings(errs ErrorList) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Error()
	}
	return out
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		obj  Object
		want []string
	}{
		{name: "valid_workspace", obj: validWorkspace()},
		{
			name: "workspace_relative_root_and_missing_profile",
			obj: func() Object {
				w := validWorkspace()
				w.Spec.Root, w.Spec.Profile = "src/webapp", ""
				return w
			}(),
			want: []string{`spec.root: must be an absolute path, got "src/webapp"`, "spec.profile: required"},
		},
		{
			name: "negative_request",
			obj: func() Object {
				w := validWorkspace()
				w.Spec.Resources = &ResourcesSpec{
					Participation: ParticipationRequired,
					Request:       &ResourceRequest{CPUMilli: ptr(int64(-5))},
				}
				return w
			}(),
			want: []string{"spec.resources.request.cpu_milli: must be a positive integer, got -5"},
		},
		{
			name: "resources_without_participation",
			obj: func() Object {
				w := validWorkspace()
				w.Spec.Resources = &ResourcesSpec{}
				return w
			}(),
			want: []string{"spec.resources.participation: required"},
		},
		{
			// The host's plan decides a cooperative memory or pids minimum
			// by rank at admission; it is no load error.
			name: "cooperative_memory_and_pids",
			obj: func() Object {
				w := validWorkspace()
				w.Spec.Resources = &ResourcesSpec{
					Participation: ParticipationOptional,
					Request:       &ResourceRequest{Minimum: &MinimumLevels{CPU: LevelCooperative, Memory: LevelCooperative, PIDs: LevelCooperative}},
				}
				return w
			}(),
		},
		{
			name: "unknown_level",
			obj: func() Object {
				w := validWorkspace()
				w.Spec.Resources = &ResourcesSpec{
					Participation: ParticipationOptional,
					Request:       &ResourceRequest{Minimum: &MinimumLevels{PIDs: "strict"}},
				}
				return w
			}(),
			want: []string{`spec.resources.request.minimum.pids: must be one of "accounted", "cooperative", "kernel", got "strict"`},
		},
		{
			name: "bad_env_and_argv0",
			obj: func() Object {
				w := validWorkspace()
				w.Spec.Exec.Argv0 = []string{"git", ""}
				w.Spec.Exec.Env = map[string]string{"A=B": "x"}
				return w
			}(),
			want: []string{"spec.exec.argv0[1]: must not be empty", "spec.exec.env[A=B]: variable name must not contain '=' or NUL"},
		},
		{
			name: "zero_max_live",
			obj: func() Object {
				w := validWorkspace()
				w.Spec.Processes.MaxLive = ptr(int64(0))
				return w
			}(),
			want: []string{"spec.processes.max_live: must be a positive integer, got 0"},
		},
		{
			name: "uppercase_name_and_declared_status",
			obj: &Profile{
				TypeMeta: TypeMeta{APIVersion: APIVersion, Kind: KindProfile},
				Metadata: ObjectMeta{Name: "Coder"},
				Status:   ProfileStatus{Status: Status{ObservedGeneration: 3}},
			},
			want: []string{"metadata.name: a lowercase RFC 1123 label", "status: is written by marshald and cannot be declared"},
		},
		{
			name: "name_too_long",
			obj:  &Profile{Metadata: ObjectMeta{Name: strings.Repeat("a", 64)}},
			want: []string{"metadata.name: must be no more than 63 characters"},
		},
		{
			name: "profile_control_grants",
			obj: &Profile{
				Metadata: ObjectMeta{Name: "coder"},
				Spec: ProfileSpec{Control: &ControlSpec{
					Run:       []string{"webapp-tests", "Bad_Name", "webapp-tests"},
					Allow:     []ControlAction{ControlApply, "write", ControlApply, ""},
					Consumers: []string{"gateway"},
				}},
			},
			want: []string{
				"spec.control.run[1]: a lowercase RFC 1123 label must consist of",
				`spec.control.run[2]: "webapp-tests" is named twice`,
				`spec.control.allow[1]: must be one of "apply", "delete", "stop", "admin", got "write"`,
				`spec.control.allow[2]: "apply" is named twice`,
				"spec.control.allow[3]: required",
			},
		},
		{
			name: "profile_control_valid",
			obj: &Profile{
				Metadata: ObjectMeta{Name: "coder"},
				Spec:     ProfileSpec{Control: &ControlSpec{Run: []string{"webapp-tests"}, Allow: ControlActions, Consumers: []string{"gateway"}}},
			},
		},
		{
			name: "profile_enums_and_limits",
			obj: &Profile{
				Metadata: ObjectMeta{Name: "coder"},
				Spec: ProfileSpec{
					Isolation: "vm",
					Orphans:   "drop",
					Limits:    &Limits{MemoryBytes: ptr(int64(0))},
				},
			},
			want: []string{
				`spec.isolation: must be one of "cgroup", "netns", got "vm"`,
				`spec.orphans: must be one of "keep", "stop", got "drop"`,
				"spec.limits.memory_bytes: must be a positive integer, got 0",
			},
		},
		{
			name: "host_bad_ttl_and_capacity",
			obj: &Host{
				Metadata: ObjectMeta{Name: "local"},
				Spec: HostSpec{
					Capacity:    &Capacity{Tasks: ptr(int64(-1))},
					PreparedTTL: &Duration{-time.Second},
				},
			},
			want: []string{"spec.capacity.tasks: must be a positive integer, got -1", "spec.prepared_ttl: must be a positive duration, got -1s"},
		},
		{name: "valid_control_service", obj: validConsumer()},
		{
			name: "valid_workload_without_reservation",
			obj: func() Object {
				c := validConsumer()
				c.Spec.Role, c.Spec.ControlReservation = RoleWorkload, nil
				return c
			}(),
		},
		{
			name: "consumer_id_beyond_dns",
			obj: func() Object {
				c := validConsumer()
				c.Spec.ConsumerID = "CodeSpace_gw.v1:main"
				return c
			}(),
		},
		{
			name: "consumer_missing_everything",
			obj:  &Consumer{Metadata: ObjectMeta{Name: "codespace"}},
			want: []string{"spec.generation: required", "spec.role: required", "spec.credential_sha256: required", "spec.max_instances: required"},
		},
		{
			name: "consumer_bad_values",
			obj: func() Object {
				c := validConsumer()
				c.Spec.ConsumerID = "code space"
				c.Spec.Generation = strings.Repeat("g", 129)
				c.Spec.Role = "admin"
				c.Spec.CredentialSHA256 = strings.ToUpper(c.Spec.CredentialSHA256)
				c.Spec.MaxInstances = ptr(int64(65))
				return c
			}(),
			want: []string{
				`spec.consumer_id: must be 1 to 128 characters`,
				`spec.generation: must be 1 to 128 characters`,
				`spec.role: must be one of "workload", "control_service", got "admin"`,
				`spec.credential_sha256: must be a SHA-256 digest`,
				`spec.max_instances: must be between 1 and 64, got 65`,
			},
		},
		{
			name: "control_service_without_reservation",
			obj: func() Object {
				c := validConsumer()
				c.Spec.ControlReservation = &ControlReservation{CPUMilli: ptr(int64(100)), Tasks: ptr(int64(0))}
				return c
			}(),
			want: []string{
				"spec.control_reservation.memory_bytes: required for a control_service",
				"spec.control_reservation.tasks: must be a positive integer for a control_service, got 0",
			},
		},
		{
			name: "workload_with_reservation",
			obj: func() Object {
				c := validConsumer()
				c.Spec.Role = RoleWorkload
				c.Spec.ControlReservation = &ControlReservation{CPUMilli: ptr(int64(0)), Tasks: ptr(int64(-1)), MemoryBytes: ptr(int64(5))}
				return c
			}(),
			want: []string{
				"spec.control_reservation.memory_bytes: must be 0 for a workload",
				"spec.control_reservation.tasks: must be a non-negative integer, got -1",
			},
		},
		{
			name: "host_devguard",
			obj: &Host{Metadata: ObjectMeta{Name: "local"}, Spec: HostSpec{DevGuard: &DevGuardSpec{
				AdminCredentialSHA256: "abc", PolicyRevision: "rev/1",
			}}},
			want: []string{"spec.devguard.admin_credential_sha256: must be a SHA-256 digest", "spec.devguard.policy_revision: must be 1 to 128"},
		},
		{
			name: "label_value_invalid",
			obj:  &Host{Metadata: ObjectMeta{Name: "local", Labels: map[string]string{"team": "a b"}}},
			want: []string{"metadata.labels[team]: a valid label must be"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := errorStrings(tc.obj.Validate())
			if len(got) != len(tc.want) {
				t.Fatalf("Validate() = %q, want %d errors starting %q", got, len(tc.want), tc.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("Validate()[%d] = %q, want prefix %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestDefaultWorkspace(t *testing.T) {
	w := validWorkspace()
	w.Spec.Root = "/src//webapp/"
	w.Default()
	s := w.Spec
	if s.Root != "/src/webapp" {
		t.Errorf("Root = %q, want cleaned /src/webapp", s.Root)
	}
	if s.Network.Policy != NetworkOpen || !*s.Exec.Allow || *s.Processes.MaxLive != 8 {
		t.Errorf("defaults = %+v, want open network, exec allowed, max_live 8", s)
	}
	if s.Resources.Participation != ParticipationNone {
		t.Errorf("Participation = %q, want none when resources is omitted", s.Resources.Participation)
	}
	r := s.Resources.Request
	if *r.CPUMilli != 250 || *r.MemoryBytes != 256<<20 || *r.Tasks != 32 {
		t.Errorf("request = %d/%d/%d, want 250/268435456/32", *r.CPUMilli, *r.MemoryBytes, *r.Tasks)
	}
	if r.Minimum.CPU != LevelAccounted || r.Minimum.Memory != LevelAccounted || r.Minimum.PIDs != LevelAccounted {
		t.Errorf("minimum = %+v, want accounted everywhere", *r.Minimum)
	}
	if errs := w.Validate(); len(errs) != 0 {
		t.Errorf("defaulted workspace is invalid: %v", errorStrings(errs))
	}
}

func TestDefaultKeepsStatedValues(t *testing.T) {
	w := validWorkspace()
	w.Spec.Exec.Allow = ptr(false)
	w.Spec.Resources = &ResourcesSpec{Participation: ParticipationRequired, Request: &ResourceRequest{Tasks: ptr(int64(7))}}
	w.Default()
	if *w.Spec.Exec.Allow || w.Spec.Resources.Participation != ParticipationRequired || *w.Spec.Resources.Request.Tasks != 7 {
		t.Errorf("Default overwrote stated values: %+v", w.Spec)
	}
}

func TestDefaultProfileAndHost(t *testing.T) {
	p := &Profile{Metadata: ObjectMeta{Name: "coder"}}
	p.Default()
	if p.Spec.Isolation != IsolationCgroup || p.Spec.Orphans != OrphansKeep || p.Spec.Limits != nil {
		t.Errorf("profile defaults = %+v, want cgroup, keep, no limits", p.Spec)
	}
	h := &Host{Metadata: ObjectMeta{Name: "local"}}
	h.Default()
	if h.Spec.PreparedTTL.Duration != 5*time.Second || h.Spec.Capacity != nil {
		t.Errorf("host defaults = %+v, want prepared_ttl 5s and capacity left to measurement", h.Spec)
	}
}

func TestLevelRank(t *testing.T) {
	if !(LevelAccounted.Rank() < LevelCooperative.Rank() && LevelCooperative.Rank() < LevelKernel.Rank()) {
		t.Error("levels are not ordered accounted < cooperative < kernel")
	}
	if Level("bogus").Rank() != 0 {
		t.Error("an unknown level ranks above nothing")
	}
}

func TestPathString(t *testing.T) {
	p := NewPath("spec", "exec").Child("argv0").Index(2)
	if got := p.String(); got != "spec.exec.argv0[2]" {
		t.Errorf("String() = %q, want spec.exec.argv0[2]", got)
	}
	base := NewPath("spec")
	a, b := base.Child("a"), base.Child("b")
	if a.String() != "spec.a" || b.String() != "spec.b" {
		t.Errorf("paths share storage: %q %q", a, b)
	}
	if got := NewPath("spec", "exec", "env").Key("HOME").String(); got != "spec.exec.env[HOME]" {
		t.Errorf("String() = %q, want spec.exec.env[HOME]", got)
	}
}

func TestDefaultConsumer(t *testing.T) {
	c := validConsumer()
	c.Spec.Role, c.Spec.ControlReservation = RoleWorkload, nil
	c.Default()
	r := c.Spec.ControlReservation
	if r == nil || *r.CPUMilli != 0 || *r.MemoryBytes != 0 || *r.Tasks != 0 {
		t.Errorf("workload reservation = %+v, want zero in every quantity", r)
	}
	if errs := c.Validate(); len(errs) != 0 {
		t.Errorf("defaulted consumer is invalid: %v", errorStrings(errs))
	}
	if got := c.ID(); got != "codespace" {
		t.Errorf("ID() = %q, want the name", got)
	}
	c.Spec.ConsumerID = "CodeSpace"
	if got := c.ID(); got != "CodeSpace" {
		t.Errorf("ID() = %q, want spec.consumer_id", got)
	}
}

func TestIdentifiersAndDigests(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want bool
	}{
		{"codespace", true}, {"A-z_0.9:x", true}, {strings.Repeat("a", 128), true},
		{"", false}, {strings.Repeat("a", 129), false}, {"a b", false}, {"a/b", false}, {"é", false},
	} {
		if got := IsIdentifier(tc.s); got != tc.want {
			t.Errorf("IsIdentifier(%q) = %v, want %v", tc.s, got, tc.want)
		}
	}
	for _, tc := range []struct {
		s    string
		want bool
	}{
		{strings.Repeat("0f", 32), true}, {strings.Repeat("0F", 32), false}, {strings.Repeat("a", 63), false}, {strings.Repeat("g", 64), false},
	} {
		if got := IsDigest(tc.s); got != tc.want {
			t.Errorf("IsDigest(%q) = %v, want %v", tc.s, got, tc.want)
		}
	}
}
