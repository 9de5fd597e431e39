package v1alpha1

import "time"

// Condition types.
const (
	// ConditionReady is True when the object is in force: a profile's
	// slice carries its limits, a workspace can run executions, the host's
	// capacity is known.
	ConditionReady = "Ready"
	// ConditionInvalid is True when the manifest declaring the object no
	// longer loads; the object keeps its last good version.
	ConditionInvalid = "Invalid"
	// ConditionConflict is True when another file declares the same
	// object too (or, for a Host, another Host); the first file in path
	// order wins.
	ConditionConflict = "Conflict"
	// ConditionEnforced is True on a Profile when every limit it requests
	// is in force on its slice, as read back.
	ConditionEnforced = "Enforced"
	// ConditionOrphaned is True on an Agent whose profile is not declared
	// and which is kept running.
	ConditionOrphaned = "Orphaned"
	// ConditionEgressProxy is True on the Host while marshald's egress
	// proxy listens on its TCP address; False says why not (the address
	// is taken, or off), and launches of profiles that declare egress
	// are refused.
	ConditionEgressProxy = "EgressProxy"
)

// Amounts are quantities of each resource.
type Amounts struct {
	// CPUMilli is CPU in thousandths of a core.
	CPUMilli int64 `json:"cpu_milli"`
	// MemoryBytes is memory in bytes.
	MemoryBytes int64 `json:"memory_bytes"`
	// Tasks is processes and threads.
	Tasks int64 `json:"tasks"`
}

// Enforcement says how firmly this host holds one resource.
type Enforcement struct {
	// Resource is cpu, memory or pids.
	Resource string `json:"resource"`
	// Level is accounted, cooperative or kernel.
	Level Level `json:"level"`
	// Method is accounting, qos_and_priority, cgroup_v2 or cgroup_v1.
	Method string `json:"method"`
	// Controller is the kernel interface file that holds a kernel-level
	// limit, such as memory.max.
	Controller string `json:"controller,omitempty"`
	// Reason says, below kernel level, why the kernel does not hold this
	// resource's limits although the host has a controller for it: not
	// delegated to marshal's tree, or a group on the way holds processes.
	Reason string `json:"reason,omitempty"`
}

// LimitStatus compares one limit a profile asks for with what reading the
// slice back showed.
type LimitStatus struct {
	// Resource is cpu, memory or pids.
	Resource string `json:"resource"`
	// Requested is the limit the spec asks for.
	Requested int64 `json:"requested"`
	// Applied is the limit in force, read back; 0 when none.
	Applied int64 `json:"applied"`
	// Enforcement says how the applied limit is held.
	Enforcement Enforcement `json:"enforcement"`
}

// ProfileStatus is the observed state of a Profile.
type ProfileStatus struct {
	Status `json:",inline"`
	// Slice is the unit name of the profile's slice.
	Slice string `json:"slice,omitempty"`
	// Limits compares each requested limit with the one in force.
	Limits []LimitStatus `json:"limits,omitempty"`
	// Agents is the number of live agents of the profile.
	Agents int64 `json:"agents"`
}

// WorkspaceStatus is the observed state of a Workspace.
type WorkspaceStatus struct {
	Status `json:",inline"`
	// Live is the number of live processes launched in the workspace.
	Live int64 `json:"live"`
	// Reserved is the number of slots held for launches in progress.
	Reserved int64 `json:"reserved,omitempty"`
}

// HostStatus is the observed state of the Host.
type HostStatus struct {
	Status `json:",inline"`
	// Backend is the cgroup backend in use: systemd or cgroupfs.
	Backend string `json:"backend,omitempty"`
	// Capacity is the capacity in force: the declared value of each
	// resource, else the measured one.
	Capacity Amounts `json:"capacity"`
	// Measured is what the machine has, as measured.
	Measured Amounts `json:"measured"`
	// Enforcement says, per resource, the highest level this host gives
	// and how.
	Enforcement []Enforcement `json:"enforcement,omitempty"`
	// Admission is the admission authority's view, when it runs.
	Admission *AdmissionStatus `json:"admission,omitempty"`
	// Agents is the number of live agents on the host. Reported on the
	// host's Host object in a Kubernetes API server.
	Agents int64 `json:"agents,omitempty"`
	// Workspaces counts the live agents of each workspace that has any,
	// by name. Reported on the host's Host object in a Kubernetes API
	// server.
	Workspaces []WorkspaceAgents `json:"workspaces,omitempty"`
	// NotReady are the host's objects that are not Ready, with their
	// conditions, by kind and name; at most 100. Reported on the host's
	// Host object in a Kubernetes API server.
	NotReady []ObjectConditions `json:"notReady,omitempty"`
}

// WorkspaceAgents is how many agents of one workspace live on a host.
type WorkspaceAgents struct {
	// Workspace names the workspace.
	Workspace string `json:"workspace"`
	// Live is the number of its live agents.
	Live int64 `json:"live"`
}

// ObjectConditions are the conditions of one object.
type ObjectConditions struct {
	// Kind and Name name the object.
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Conditions are its conditions.
	Conditions []Condition `json:"conditions"`
}

// AdmissionStatus is the admission authority's view of the host.
type AdmissionStatus struct {
	// Ready reports whether the authority can decide; NotReady says why
	// not: host_unset, plan_unset; journal_full (the state disk is full)
	// or journal_failed (another write error), each retried by the next
	// request; journal_unknown (a failed commit's outcome is unknown:
	// marshald must be restarted).
	Ready    bool   `json:"ready"`
	NotReady string `json:"notReady,omitempty"`
	// NotReadySince is when the journal's commits began to fail, while
	// NotReady is one of the journal's reasons.
	NotReadySince time.Time `json:"notReadySince,omitzero"`
	// Capacity is the work capacity the authority reserves from: the
	// declared capacity, or the measured one less a system reservation,
	// less Reserved.
	Capacity Amounts `json:"capacity"`
	// Reserved is what the Consumers' static control reservations take
	// off the capacity: each control service's reservation times its
	// max_instances.
	Reserved Amounts `json:"reserved,omitzero"`
	// Target is the capacity the authority admits against now: Capacity
	// scaled by pressure.
	Target Amounts `json:"target"`
	// Committed is what charged attempts hold.
	Committed Amounts `json:"committed"`
	// Free is Target minus Committed, never negative.
	Free Amounts `json:"free"`
	// Pressure is normal (Target is the whole Capacity), constrained
	// (half of it) or critical (nothing new is admitted).
	Pressure string `json:"pressure"`
	// PressureReason names the signal behind Pressure.
	PressureReason string `json:"pressureReason,omitempty"`
	// PressureMessage says why in a few words: "cpu pressure", "state
	// disk nearly full: 3 MiB free".
	PressureMessage string `json:"pressureMessage,omitempty"`
	// PressureSince is when Pressure last changed.
	PressureSince time.Time `json:"pressureSince,omitzero"`
	// Charged is the number of attempts holding a reservation.
	Charged int64 `json:"charged"`
}

// KindAgent is the kind of observed agents. Agents are not declared: each
// is a live marshal scope.
const KindAgent = "Agent"

// Agent is one live agent launch: a marshal scope and its process tree.
// marshald reports agents; manifests cannot declare them.
type Agent struct {
	TypeMeta `json:",inline"`
	// Metadata.Name is the scope's unit name.
	Metadata ObjectMeta `json:"metadata"`
	// Status is what marshald observes.
	Status AgentStatus `json:"status"`
}

// AgentStatus is what marshald observes of an agent.
type AgentStatus struct {
	Status `json:",inline"`
	// Profile is the profile the scope name registers.
	Profile string `json:"profile"`
	// ID is the launch's 32 hex digits, shared with its attempt.
	ID string `json:"id"`
	// Path is the scope's cgroup path.
	Path string `json:"path"`
	// Workspace is the workspace the agent was launched in, when known.
	Workspace string `json:"workspace,omitempty"`
	// Consumer is, for an agent a consumer of the DevGuard socket
	// launched (through its launch helper, in no workspace), the
	// consumer's id.
	Consumer string `json:"consumer,omitempty"`
	// Attempt is the admission attempt bound to the scope, when any.
	Attempt string `json:"attempt,omitempty"`
	// Launched reports whether marshald launched the scope: its launch
	// path recorded it. A scope it did not launch (made by hand, or by
	// another tool under the naming contract) is foreign: its name proves
	// nothing, and whatever decides on identity (egress, DevGuard
	// observe) must not count it as an agent of its profile.
	Launched bool `json:"launched"`
	// Populated reports whether any process is in the scope.
	Populated bool `json:"populated"`
	// Usage is what the scope uses.
	Usage AgentUsage `json:"usage"`
	// Since is when marshald first saw the scope.
	Since time.Time `json:"since,omitzero"`
}

// AgentUsage is what an agent's scope uses.
type AgentUsage struct {
	// CPUUsec is the CPU time used so far, in microseconds.
	CPUUsec int64 `json:"cpu_usec"`
	// MemoryBytes is the memory in use.
	MemoryBytes int64 `json:"memory_bytes"`
	// Tasks is the number of processes and threads.
	Tasks int64 `json:"tasks"`
}

// ConsumerStatus is the observed state of a Consumer.
type ConsumerStatus struct {
	Status `json:",inline"`
	// ConsumerID is the consumer's id on DevGuard's wire: spec.consumer_id,
	// else the name.
	ConsumerID string `json:"consumerID,omitempty"`
}
