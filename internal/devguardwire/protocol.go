package devguardwire

// Versions of DevGuard's wire this package speaks.
const (
	// WireVersion is the envelope's version.
	WireVersion = 1
	// Protocol is the protocol hello negotiates.
	Protocol = 1
)

// Method names a request.
type Method string

// The requests of protocol 1.
const (
	MethodHello         Method = "hello"
	MethodAuthenticate  Method = "authenticate"
	MethodStatus        Method = "status"
	MethodRegister      Method = "register"
	MethodAdmit         Method = "admit"
	MethodBeginLaunch   Method = "begin_launch"
	MethodLookup        Method = "lookup"
	MethodCancel        Method = "cancel"
	MethodAbandonLaunch Method = "abandon_launch"
	MethodObserve       Method = "observe"
	MethodTerminate     Method = "terminate"
	MethodLaunch        Method = "launch"
	// The parent-lease requests, which a client sends only once hello
	// stated parent_lease. They are decoded, so that a frame holding one
	// is not malformed, and answered resource_policy_unsupported: this
	// authority does not state the capability.
	MethodAdmitLease  Method = "admit_lease"
	MethodAdmitChild  Method = "admit_child"
	MethodEndLease    Method = "end_lease"
	MethodLeaseStatus Method = "lease_status"
)

// Capability is a capability hello may state or require.
type Capability string

// The capabilities of protocol 1. A name not listed makes hello
// undecodable, as in DevGuard.
const (
	CapDurableAdmission          Capability = "durable_admission"
	CapFencedLaunch              Capability = "fenced_launch"
	CapPerResourceEvidence       Capability = "per_resource_evidence"
	CapStaticControlReservations Capability = "static_control_reservations"
	CapMacOSCooperative          Capability = "macos_cooperative"
	CapLinuxCgroupV2             Capability = "linux_cgroup_v2"
	CapParentLease               Capability = "parent_lease"
	CapUpgradeDrain              Capability = "upgrade_drain"
)

var capabilities = []Capability{CapDurableAdmission, CapFencedLaunch, CapPerResourceEvidence,
	CapStaticControlReservations, CapMacOSCooperative, CapLinuxCgroupV2, CapParentLease, CapUpgradeDrain}

// Compatibility is what a client's hello asks for.
type Compatibility struct {
	MinimumProtocol uint32
	MaximumProtocol uint32
	// Required is a set: each capability once, in the order DevGuard's
	// BTreeSet keeps them.
	Required []Capability
}

// CredentialKind says who authenticates.
type CredentialKind string

const (
	CredentialConsumer      CredentialKind = "consumer"
	CredentialAdministrator CredentialKind = "administrator"
)

// Credential is authenticate's credential. Secret never prints itself.
type Credential struct {
	Kind       CredentialKind
	ConsumerID string // consumer only
	Generation string // consumer only
	Secret     Secret
}

// Secret is 64 lowercase hex digits: a credential, a permit or a lease
// token. Only its holder's side ever sees it; it never prints itself.
type Secret struct{ s string }

// Expose returns the secret itself.
func (s Secret) Expose() string { return s.s }

func (s Secret) String() string   { return "Secret([REDACTED])" }
func (s Secret) GoString() string { return s.String() }

// NewSecret returns s as a Secret, or false when it is not 64 lowercase
// hex digits.
func NewSecret(s string) (Secret, bool) {
	if !isHex64(s) {
		return Secret{}, false
	}
	return Secret{s}, true
}

// Key is an attempt key: three identifiers, as the client wrote them.
// Decoding does not check them; the request does, in DevGuard's order.
type Key struct {
	ConsumerID         string `json:"consumer_id"`
	ConsumerGeneration string `json:"consumer_generation"`
	AttemptID          string `json:"attempt_id"`
}

// Budget is an amount of each resource, as u64 quantities.
type Budget struct {
	CPUMilli    uint64 `json:"cpu_milli"`
	MemoryBytes uint64 `json:"memory_bytes"`
	Tasks       uint64 `json:"tasks"`
}

// Level is an enforcement level.
type Level string

const (
	LevelAccounted   Level = "accounted"
	LevelCooperative Level = "cooperative"
	LevelKernel      Level = "kernel"
)

// Levels is the least level per resource.
type Levels struct {
	CPU    Level `json:"cpu"`
	Memory Level `json:"memory"`
	PIDs   Level `json:"pids"`
}

// Intent is an admission's resource intent.
type Intent struct {
	Profile   string `json:"profile"`
	Requested Budget `json:"requested"`
	Minimum   Levels `json:"minimum"`
}

// Admission is admit's request.
type Admission struct {
	Key             Key    `json:"key"`
	ExecutionDigest string `json:"execution_digest"`
	Intent          Intent `json:"intent"`
}

// AbandonReason is why an owner abandons a launch.
type AbandonReason string

const (
	AbandonGrantNotReceived AbandonReason = "grant_not_received"
	AbandonSpawnFailed      AbandonReason = "spawn_failed"
	AbandonHelperExited     AbandonReason = "helper_exited"
)

// Signal is a signal terminate sends.
type Signal string

const (
	SignalInterrupt Signal = "interrupt"
	SignalHangup    Signal = "hangup"
	SignalTerminate Signal = "terminate"
	SignalKill      Signal = "kill"
)

// Request is one decoded request frame: the envelope and the parameters
// its method has.
type Request struct {
	Version uint32
	ID      uint64
	Method  Method

	Compatibility Compatibility // hello
	Credential    Credential    // authenticate
	InstanceID    string        // register, launch
	Admission     Admission     // admit, admit_child
	Key           Key           // begin_launch … terminate, launch, the lease requests
	Reason        AbandonReason // abandon_launch
	Signal        Signal        // terminate
	Permit        Secret        // launch
	Token         Secret        // admit_child, lease_status
	Budget        Budget        // admit_lease
	TTLMS         *uint64       // admit_lease
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
