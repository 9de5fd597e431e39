package v1alpha1

import (
	"fmt"
	"time"
)

// Group, Version and APIVersion name this API.
const (
	Group      = "marshal.dev"
	Version    = "v1alpha1"
	APIVersion = Group + "/" + Version
)

// Kinds served by this API version.
const (
	KindProfile   = "Profile"
	KindWorkspace = "Workspace"
	KindHost      = "Host"
	KindConsumer  = "Consumer"
)

// Kinds lists every kind of this API version in sorted order.
var Kinds = []string{KindConsumer, KindHost, KindProfile, KindWorkspace}

// TypeMeta is the envelope every manifest starts with.
type TypeMeta struct {
	// APIVersion must be "marshal.dev/v1alpha1".
	APIVersion string `json:"apiVersion"`
	// Kind is one of Profile, Workspace, Host, Consumer.
	Kind string `json:"kind"`
}

// ObjectMeta names an object.
type ObjectMeta struct {
	// Name identifies the object among those of its kind. Required: a
	// DNS-1123 label (lowercase letters, digits and '-', starting and
	// ending with a letter or digit), at most 63 characters.
	Name string `json:"name"`
	// Labels are free key/value pairs for people and tools, with
	// Kubernetes label syntax. Optional.
	Labels map[string]string `json:"labels,omitempty"`
	// Generation counts changes to the spec. Set by marshald; a manifest
	// must not declare it.
	Generation int64 `json:"generation,omitempty"`
	// CreationTimestamp is when marshald first saw the object. Set by
	// marshald; a manifest must not declare it.
	CreationTimestamp time.Time `json:"creationTimestamp,omitzero"`
}

// Object is what every kind of this API version implements.
type Object interface {
	// GetTypeMeta returns the object's envelope.
	GetTypeMeta() *TypeMeta
	// GetObjectMeta returns the object's metadata.
	GetObjectMeta() *ObjectMeta
	// GetSpec returns the object's spec (a ProfileSpec for a Profile):
	// the desired state that metadata.generation numbers the changes of.
	GetSpec() any
	// ClearStatus zeroes the object's status: observed state, which a
	// declaration never carries.
	ClearStatus()
	// DeepCopyObject returns a copy of the object that shares no memory
	// with it.
	DeepCopyObject() Object
	// Default fills every omitted optional field with its default.
	Default()
	// Validate checks the object as written, before defaulting.
	Validate() ErrorList
}

// Isolation says how a profile's agents are separated from the host.
type Isolation string

const (
	// IsolationCgroup identifies and limits an agent's process tree with a
	// cgroup per launch.
	IsolationCgroup Isolation = "cgroup"
	// IsolationNetns also runs each agent in a network namespace of its
	// own with only loopback, where a bridge to marshald's egress proxy is
	// the only way out: the profile's egress rules are enforced, not
	// offered.
	IsolationNetns Isolation = "netns"
)

// OrphanPolicy says what happens to live agents when their profile is
// deleted.
type OrphanPolicy string

const (
	// OrphansKeep leaves live agents running; they keep their scope.
	OrphansKeep OrphanPolicy = "keep"
	// OrphansStop kills every live agent of the deleted profile.
	OrphansStop OrphanPolicy = "stop"
)

// Profile is an agent identity class: every agent launched under it runs in
// a scope named after it, inside the profile's slice, which carries the
// profile's limits.
type Profile struct {
	TypeMeta `json:",inline"`
	// Metadata names the profile. The name is part of every scope name.
	Metadata ObjectMeta `json:"metadata"`
	// Spec is the desired state.
	Spec ProfileSpec `json:"spec"`
	// Status is the observed state, written by marshald.
	Status ProfileStatus `json:"status,omitzero"`
}

// ProfileSpec is the desired state of a Profile.
type ProfileSpec struct {
	// Isolation is how agents of this profile are separated: "cgroup"
	// (identify and limit the process tree; the egress proxy is offered
	// through the proxy variables) or "netns" (also a network namespace
	// of its own per agent, whose only way out is the egress proxy, so
	// its rules are enforced; spec.egress omitted then allows every
	// destination but the private ranges, through the proxy, audited).
	// Default "cgroup".
	Isolation Isolation `json:"isolation,omitempty"`
	// Limits are kernel limits on the profile's slice, shared by all its
	// agents together. Omitted: no limits.
	Limits *Limits `json:"limits,omitempty"`
	// Orphans says what happens to live agents when the profile is
	// deleted: "keep" them running or "stop" them. Default "keep".
	Orphans OrphanPolicy `json:"orphans,omitempty"`
	// Egress is where the profile's agents may connect through marshald's
	// egress proxy, which every launch of the profile is pointed at
	// (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY). Loopback, private (RFC 1918),
	// link-local (cloud metadata), CGNAT and IPv6 unique-local addresses
	// are refused unless the rule that allows them names the host without
	// a wildcard or holds a CIDR that contains the address. Omitted: no
	// proxy is offered and launches run as before.
	Egress *EgressSpec `json:"egress,omitempty"`
	// Filesystem is what files and local sockets the profile's agents may
	// read and write, enforced by the kernel for each agent's whole
	// process tree from before its first instruction. Declaring it, even
	// {}, gives the defaults: the workspace, the launch's private {tmp}
	// and /dev/shm, and common tool caches writable; credential stores (~/.ssh, ~/.aws,
	// ~/.gnupg, ~/.config/gh, ~/.netrc, ~/.git-credentials, ~/.docker,
	// ~/.kube, ~/.config/gcloud, ~/.azure), the user's runtime directory,
	// its ssh agent, the host's service sockets (system bus, service
	// managers, container engines, resolvers) and marshald's own config
	// dir, state dir and sockets hidden; {workspace}/.git/hooks and
	// {workspace}/.git/config read-only. A rule for the same path
	// overrides a default. A host that cannot enforce the rules refuses
	// the launch (ISOLATION_UNSUPPORTED). Edits apply to later launches.
	// Omitted: agents read and write what their user can.
	Filesystem *FilesystemSpec `json:"filesystem,omitempty"`
	// Control is what the profile's agents may ask of marshald, through
	// its local API and its DevGuard socket, beyond reading and running
	// into their own workspace. Omitted: nothing beyond.
	Control *ControlSpec `json:"control,omitempty"`
}

// ControlAction names a kind of request to marshald that changes what it
// governs, which an agent may make only when its profile grants it.
type ControlAction string

const (
	// ControlApply grants apply: declaring, changing or replacing any
	// object (apply without --dry-run).
	ControlApply ControlAction = "apply"
	// ControlDelete grants delete: ceasing to declare any object.
	ControlDelete ControlAction = "delete"
	// ControlStop grants stop and kill of any agent, its own included.
	ControlStop ControlAction = "stop"
	// ControlAdmin grants the administrator's requests: confirming an
	// emptied config dir and copying the admission journal (backup).
	ControlAdmin ControlAction = "admin"
)

// ControlActions are the actions a profile may grant, in the order the
// reference lists them.
var ControlActions = []ControlAction{ControlApply, ControlDelete, ControlStop, ControlAdmin}

// ControlSpec is what a profile's agents may ask of marshald beyond what
// every agent may: read (get, describe, events, wait, identify, doctor,
// version, the egress log lines of its own workspace) and run into its
// own workspace. A request from inside an agent's scope that it does not
// grant is refused FORBIDDEN before anything changes or starts, and a
// ControlRefused event is recorded on the agent's Workspace.
type ControlSpec struct {
	// The workspaces, besides the agent's own, that its agents
	// may run into. A run lands in a new scope of the target workspace's
	// profile, counted against that workspace's slots and admission.
	Run []string `json:"run,omitempty"`
	// The changes its agents may ask for: "apply", "delete",
	// "stop" (stop and kill any agent) and "admin" (confirm an emptied
	// config dir, back up the journal). Omitted: none.
	Allow []ControlAction `json:"allow,omitempty"`
	// The Consumers whose secret its agents may present on the DevGuard
	// socket, each by the id it presents there (its consumer_id, which is
	// its name unless set). Omitted: none, so a consumer's secret from
	// inside an agent is refused; the administrator's secret needs
	// "admin" in allow.
	Consumers []string `json:"consumers,omitempty"`
}

// EgressAction is what an egress rule, or the default, does with a
// connection.
type EgressAction string

const (
	// EgressAllow lets the connection through.
	EgressAllow EgressAction = "allow"
	// EgressDeny refuses it.
	EgressDeny EgressAction = "deny"
)

// EgressSpec is a profile's egress policy: rules tried in order, the
// first that matches deciding, and a default for destinations no rule
// matches. Loopback, private (RFC 1918), link-local (which holds cloud
// metadata), CGNAT and IPv6 unique-local addresses are refused unless the
// rule that allows them names the host exactly (no wildcard) or holds a
// CIDR that contains the address.
type EgressSpec struct {
	// Default is what happens to a destination no rule matches: "deny" or
	// "allow". Default "deny".
	Default EgressAction `json:"default,omitempty"`
	// Rules are tried in order; the first that matches a destination
	// decides. Empty: the default decides everything.
	Rules []EgressRule `json:"rules,omitempty"`
}

// EgressRule matches destinations by host name or address, and port. A
// rule with neither hosts nor cidrs matches every destination on its
// ports.
type EgressRule struct {
	// Action is "allow" or "deny". Required.
	Action EgressAction `json:"action"`
	// Hosts are host names, matched without regard to case: "github.com"
	// is that name only; "*.github.com" any name that ends in
	// ".github.com", at any depth, but not "github.com" itself; "*" any
	// name. A host name never matches a destination given as an IP
	// address; cidrs do. Lowercase RFC 1123 names, the leftmost label
	// optionally "*".
	Hosts []string `json:"hosts,omitempty"`
	// CIDRs are address ranges ("10.20.0.0/16", "2001:db8::/32") matched
	// against every address a destination resolves to, and against an
	// IP address given as the destination. Written with no bits set
	// beyond the prefix length.
	CIDRs []string `json:"cidrs,omitempty"`
	// Ports are the destination ports the rule matches, each from 1 to
	// 65535. Empty: every port.
	Ports []int32 `json:"ports,omitempty"`
}

// Limits caps the resources of a group of processes. Each field is
// optional; an omitted field is not limited.
type Limits struct {
	// CPUMilli is CPU time in thousandths of a core (1000 = one full
	// core). A positive integer.
	CPUMilli *int64 `json:"cpu_milli,omitempty"`
	// MemoryBytes is the memory limit in bytes. A positive integer.
	MemoryBytes *int64 `json:"memory_bytes,omitempty"`
	// Tasks is the maximum number of processes and threads. A positive
	// integer.
	Tasks *int64 `json:"tasks,omitempty"`
}

// Workspace is a directory where agents of one profile may run, with the
// policy for what they may execute and the resources each execution asks
// for.
type Workspace struct {
	TypeMeta `json:",inline"`
	// Metadata names the workspace; `marshalctl run -w NAME` uses it.
	Metadata ObjectMeta `json:"metadata"`
	// Spec is the desired state.
	Spec WorkspaceSpec `json:"spec"`
	// Status is the observed state, written by marshald.
	Status WorkspaceStatus `json:"status,omitzero"`
}

// WorkspaceSpec is the desired state of a Workspace.
type WorkspaceSpec struct {
	// Root is the workspace's directory, where executions start. Required:
	// an absolute path. The workspace is Ready only while it is an
	// existing directory.
	Root string `json:"root"`
	// Profile names the Profile that agents of this workspace run under.
	// Required. A profile that does not exist keeps the workspace from
	// being Ready; it is not a load error.
	Profile string `json:"profile"`
	// Network is the network policy, part of the meaning of every
	// execution.
	Network NetworkSpec `json:"network,omitzero"`
	// Exec is the execution policy.
	Exec ExecSpec `json:"exec,omitzero"`
	// Processes bounds the live processes of the workspace.
	Processes ProcessesSpec `json:"processes,omitzero"`
	// Resources says whether executions go through admission and what
	// each one requests. Omitted: participation "none".
	Resources *ResourcesSpec `json:"resources,omitempty"`
}

// NetworkPolicy is what network access executions of a workspace have.
type NetworkPolicy string

const (
	// NetworkOpen gives executions the network their profile gives: the
	// host's, or the egress proxy's under its rules.
	NetworkOpen NetworkPolicy = "open"
	// NetworkNone runs every execution in a network namespace of its own
	// with only loopback and no bridge: no egress at all, whatever the
	// profile says.
	NetworkNone NetworkPolicy = "none"
)

// NetworkSpec is a workspace's network policy.
type NetworkSpec struct {
	// Policy is the network policy: "open" (what the profile gives) or
	// "none" (no network at all). Default "open".
	Policy NetworkPolicy `json:"policy,omitempty"`
}

// ExecSpec is a workspace's execution policy.
type ExecSpec struct {
	// Allow permits executions in this workspace. Default true.
	Allow *bool `json:"allow,omitempty"`
	// Argv0 is an allow-list of commands: when not empty, argv[0] of an
	// execution must equal one of its entries. Empty: any command.
	Argv0 []string `json:"argv0,omitempty"`
	// Env is extra environment for executions, added to the caller's.
	// Keys are environment variable names (no '=', no NUL).
	Env map[string]string `json:"env,omitempty"`
}

// ProcessesSpec bounds a workspace's live processes.
type ProcessesSpec struct {
	// MaxLive is the number of live-process slots: executions that may
	// run at once, counting those being prepared. A positive integer.
	// Default 8.
	MaxLive *int64 `json:"max_live,omitempty"`
}

// Participation says whether executions of a workspace go through the
// admission authority.
type Participation string

const (
	// ParticipationRequired never runs an execution without a reservation.
	ParticipationRequired Participation = "required"
	// ParticipationOptional asks for a reservation and, when denied or
	// when the authority cannot answer, runs unaccounted and says so.
	ParticipationOptional Participation = "optional"
	// ParticipationNone runs executions without asking.
	ParticipationNone Participation = "none"
)

// ResourcesSpec is a workspace's participation in admission.
type ResourcesSpec struct {
	// Participation is "required", "optional" or "none". Required
	// whenever resources is present.
	Participation Participation `json:"participation"`
	// Request is what each execution reserves.
	Request *ResourceRequest `json:"request,omitempty"`
}

// Level is how firmly a resource request is held, ordered
// accounted < cooperative < kernel. A request names the least level it
// accepts; the host grants a resource at the level it gives it, and a
// minimum above that is refused, whatever the resource.
type Level string

const (
	// LevelAccounted is bookkeeping in the authority's ledger.
	LevelAccounted Level = "accounted"
	// LevelCooperative is scheduling priority, not a limit (cpu only).
	LevelCooperative Level = "cooperative"
	// LevelKernel is a cgroup controller limit on the agent's scope.
	LevelKernel Level = "kernel"
)

// Levels lists every level, weakest first.
var Levels = []Level{LevelAccounted, LevelCooperative, LevelKernel}

// Rank orders levels: accounted 1, cooperative 2, kernel 3, anything
// else 0.
func (l Level) Rank() int {
	switch l {
	case LevelAccounted:
		return 1
	case LevelCooperative:
		return 2
	case LevelKernel:
		return 3
	}
	return 0
}

// ResourceRequest is what one execution reserves, and the least firm level
// at which each resource must be held.
type ResourceRequest struct {
	// CPUMilli is CPU in thousandths of a core. A positive integer.
	// Default 250.
	CPUMilli *int64 `json:"cpu_milli,omitempty"`
	// MemoryBytes is memory in bytes. A positive integer. Default
	// 268435456 (256 MiB).
	MemoryBytes *int64 `json:"memory_bytes,omitempty"`
	// Tasks is processes and threads. A positive integer. Default 32.
	Tasks *int64 `json:"tasks,omitempty"`
	// Minimum is the least level per resource; a host that cannot give it
	// refuses the execution with RESOURCE_POLICY_UNSUPPORTED.
	Minimum *MinimumLevels `json:"minimum,omitempty"`
}

// MinimumLevels is the least level per resource.
type MinimumLevels struct {
	// CPU is "accounted", "cooperative" (the agent runs at nice 10:
	// scheduling priority, not a limit) or "kernel" (a CPU quota on its
	// scope). Default "accounted".
	CPU Level `json:"cpu,omitempty"`
	// Memory is "accounted", "cooperative" or "kernel" (a memory limit on
	// the agent's scope, equal to the request). No host holds memory
	// cooperatively, so a cooperative minimum is met only by a kernel
	// limit. Default "accounted".
	Memory Level `json:"memory,omitempty"`
	// PIDs is "accounted", "cooperative" or "kernel" (a tasks limit on
	// the agent's scope, equal to the request); cooperative is met only by
	// a kernel limit, as for memory. Default "accounted".
	PIDs Level `json:"pids,omitempty"`
}

// Host declares the capacity the admission authority may reserve on this
// machine. At most one Host may be declared.
type Host struct {
	TypeMeta `json:",inline"`
	// Metadata names the host object (conventionally "local").
	Metadata ObjectMeta `json:"metadata"`
	// Spec is the desired state.
	Spec HostSpec `json:"spec"`
	// Status is the observed state, written by marshald.
	Status HostStatus `json:"status,omitzero"`
}

// HostSpec is the desired state of the Host.
type HostSpec struct {
	// Capacity is what the authority may reserve in all. Omitted, or a
	// field of it omitted: measured from the machine.
	Capacity *Capacity `json:"capacity,omitempty"`
	// PreparedTTL is how long an admitted execution may wait to be
	// launched before its reservation expires. A positive Go duration
	// ("5s", "1m"). Default 5s.
	PreparedTTL *Duration `json:"prepared_ttl,omitempty"`
	// Egress is the host-wide policy of marshald's egress proxy.
	Egress *HostEgressSpec `json:"egress,omitempty"`
	// DevGuard configures the authority as DevGuard's clients see it on
	// the socket marshald serves with --devguard-socket. Omitted: no
	// administrator can authenticate, and attempts carry the default
	// policy revision.
	DevGuard *DevGuardSpec `json:"devguard,omitempty"`
}

// HostEgressSpec is what the egress proxy does beyond the profiles' rules.
type HostEgressSpec struct {
	// Unscoped is what the proxy does with a connection from a process
	// that is in no scope marshald launched: "deny" (refused, and
	// audited) or "allow" (let through to any destination outside the
	// private ranges). Default "deny".
	Unscoped EgressAction `json:"unscoped,omitempty"`
}

// DevGuardSpec is the Host's part of the DevGuard configuration; the
// Consumers are the rest.
type DevGuardSpec struct {
	// AdminCredentialSHA256 is the SHA-256 of the administrator's secret,
	// as 64 lowercase hex digits: the digest of the 64 characters the
	// administrator presents. Omitted: no administrator authenticates.
	// It must differ from every Consumer's credential_sha256.
	AdminCredentialSHA256 string `json:"admin_credential_sha256,omitempty"`
	// PolicyRevision names the policy in force; every attempt admitted
	// records it. 1 to 128 characters of A-Z, a-z, 0-9, '-', '_', '.' and
	// ':'. Default "marshal".
	PolicyRevision string `json:"policy_revision,omitempty"`
}

// ConsumerRole is what a consumer's sessions may do.
type ConsumerRole string

const (
	// RoleWorkload registers instances that admit and launch their own
	// executions; it holds no control reservation.
	RoleWorkload ConsumerRole = "workload"
	// RoleControlService is a long-lived service, such as CodeSpace's
	// gateway, whose own control costs are covered by a static control
	// reservation per instance.
	RoleControlService ConsumerRole = "control_service"
)

// Consumer is a client of the DevGuard-compatible authority marshald
// serves with --devguard-socket, such as CodeSpace's gateway: the digest
// of its credential, its role, how many instances it may register and
// what each of them reserves for its own control. Only the digest of the
// credential is ever in a manifest.
type Consumer struct {
	TypeMeta `json:",inline"`
	// Metadata names the consumer. The name is its consumer_id on the
	// wire unless spec.consumer_id says otherwise.
	Metadata ObjectMeta `json:"metadata"`
	// Spec is the desired state.
	Spec ConsumerSpec `json:"spec"`
	// Status is the observed state, written by marshald.
	Status ConsumerStatus `json:"status,omitzero"`
}

// ConsumerSpec is the desired state of a Consumer.
type ConsumerSpec struct {
	// ConsumerID is the consumer's id on DevGuard's wire, for an id that
	// is not a DNS-1123 label (capitals, '_', '.' or ':'): 1 to 128
	// characters of A-Z, a-z, 0-9, '-', '_', '.' and ':'. Default
	// metadata.name. Two Consumers with one id are a conflict, and
	// neither authenticates.
	ConsumerID string `json:"consumer_id,omitempty"`
	// Generation is the credential's generation, which the consumer
	// presents with its secret. Required: 1 to 128 characters of A-Z,
	// a-z, 0-9, '-', '_', '.' and ':'. Attempts are keyed by consumer and
	// generation: a new generation starts a new key space.
	Generation string `json:"generation"`
	// Role is "workload" or "control_service". Required.
	Role ConsumerRole `json:"role"`
	// CredentialSHA256 is the SHA-256 of the consumer's secret, as 64
	// lowercase hex digits: the digest of the 64 characters the consumer
	// presents. Required, and different from every other credential.
	CredentialSHA256 string `json:"credential_sha256"`
	// MaxInstances is how many instances of the consumer may be
	// registered at once, 1 to 64. Required.
	MaxInstances *int64 `json:"max_instances,omitempty"`
	// ControlReservation is what each instance of a control service
	// reserves for its own control, taken off the work capacity
	// max_instances times whether or not the instances run. Required for
	// a control_service, every quantity positive; a workload reserves
	// nothing: omitted, or every quantity zero.
	ControlReservation *ControlReservation `json:"control_reservation,omitempty"`
}

// ControlReservation is a static reservation per instance.
type ControlReservation struct {
	// CPUMilli is CPU in thousandths of a core. A non-negative integer.
	CPUMilli *int64 `json:"cpu_milli,omitempty"`
	// MemoryBytes is memory in bytes. A non-negative integer.
	MemoryBytes *int64 `json:"memory_bytes,omitempty"`
	// Tasks is processes and threads. A non-negative integer.
	Tasks *int64 `json:"tasks,omitempty"`
}

// Capacity is a host's reservable work capacity. Each field is optional;
// an omitted field is measured.
type Capacity struct {
	// CPUMilli is CPU in thousandths of a core. A positive integer.
	CPUMilli *int64 `json:"cpu_milli,omitempty"`
	// MemoryBytes is memory in bytes. A positive integer.
	MemoryBytes *int64 `json:"memory_bytes,omitempty"`
	// Tasks is processes and threads. A positive integer.
	Tasks *int64 `json:"tasks,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("5s").
type Duration struct {
	time.Duration
}

// MarshalText writes the duration as a Go duration string.
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(d.Duration.String()), nil
}

// UnmarshalText reads a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("must be a duration such as 5s or 1m30s, got %q", b)
	}
	d.Duration = v
	return nil
}

// Status is the observed state of an object, written by marshald.
type Status struct {
	// ObservedGeneration is the generation of the spec the status
	// describes.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions are the latest observations of the object's state.
	Conditions []Condition `json:"conditions,omitempty"`
}

// ConditionStatus is True, False or Unknown.
type ConditionStatus string

// Condition statuses.
const (
	ConditionTrue    ConditionStatus = "True"
	ConditionFalse   ConditionStatus = "False"
	ConditionUnknown ConditionStatus = "Unknown"
)

// Condition is one aspect of an object's state, as in Kubernetes.
type Condition struct {
	// Type names the aspect, in CamelCase (Ready, Invalid).
	Type string `json:"type"`
	// Status is True, False or Unknown.
	Status ConditionStatus `json:"status"`
	// Reason is a CamelCase word saying why.
	Reason string `json:"reason,omitempty"`
	// Message says why in words.
	Message string `json:"message,omitempty"`
	// LastTransitionTime is when Status last changed.
	LastTransitionTime time.Time `json:"lastTransitionTime,omitzero"`
	// ObservedGeneration is the spec generation this condition was set
	// for.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

func (p *Profile) GetTypeMeta() *TypeMeta     { return &p.TypeMeta }
func (p *Profile) GetObjectMeta() *ObjectMeta { return &p.Metadata }
func (p *Profile) GetSpec() any               { return p.Spec }
func (p *Profile) ClearStatus()               { p.Status = ProfileStatus{} }

func (w *Workspace) GetTypeMeta() *TypeMeta     { return &w.TypeMeta }
func (w *Workspace) GetObjectMeta() *ObjectMeta { return &w.Metadata }
func (w *Workspace) GetSpec() any               { return w.Spec }
func (w *Workspace) ClearStatus()               { w.Status = WorkspaceStatus{} }

func (h *Host) GetTypeMeta() *TypeMeta     { return &h.TypeMeta }
func (h *Host) GetObjectMeta() *ObjectMeta { return &h.Metadata }
func (h *Host) GetSpec() any               { return h.Spec }
func (h *Host) ClearStatus()               { h.Status = HostStatus{} }

func (c *Consumer) GetTypeMeta() *TypeMeta     { return &c.TypeMeta }
func (c *Consumer) GetObjectMeta() *ObjectMeta { return &c.Metadata }
func (c *Consumer) GetSpec() any               { return c.Spec }
func (c *Consumer) ClearStatus()               { c.Status = ConsumerStatus{} }

var (
	_ Object = (*Profile)(nil)
	_ Object = (*Workspace)(nil)
	_ Object = (*Host)(nil)
	_ Object = (*Consumer)(nil)
)

// New returns an empty object of kind with its envelope set, or nil when
// the kind is not served by this version.
func New(kind string) Object {
	switch kind {
	case KindProfile:
		return &Profile{TypeMeta: TypeMeta{APIVersion: APIVersion, Kind: kind}}
	case KindWorkspace:
		return &Workspace{TypeMeta: TypeMeta{APIVersion: APIVersion, Kind: kind}}
	case KindHost:
		return &Host{TypeMeta: TypeMeta{APIVersion: APIVersion, Kind: kind}}
	case KindConsumer:
		return &Consumer{TypeMeta: TypeMeta{APIVersion: APIVersion, Kind: kind}}
	}
	return nil
}
