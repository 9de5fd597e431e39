package localapi

import (
	"encoding/json"
	"strings"

	"github.com/marshal-dev/marshal/api/v1alpha1"
)

// Routes. Objects are addressed as ObjectsPath + plural [+ "/" + name].
const (
	InfoPath         = "/v1/info"
	ObjectsPath      = "/v1/objects/"
	EventsPath       = "/v1/events"
	ApplyPath        = "/v1/apply"
	DeletePath       = "/v1/delete"
	ConfirmEmptyPath = "/v1/confirm-empty"
	DoctorPath       = "/v1/doctor"
	// BackupPath streams a consistent copy of the admission journal.
	BackupPath = "/v1/admin/backup"
	// RunPath launches the caller as an agent (POST a RunRequest; the
	// answer is a RunResult).
	RunPath = "/v1/run"
	// MetricsPath answers marshald's metrics in the Prometheus text
	// format.
	MetricsPath = "/metrics"
	// StopPath stops an agent (POST a StopRequest; the answer is a
	// StopResult).
	StopPath = "/v1/stop"
	// RenderPath applies JSONPath templates to documents (POST a
	// RenderRequest; the answer is a RenderResult).
	RenderPath = "/v1/render"
)

// Query parameters.
const (
	// WatchParam=1 turns a list into a stream: the current items first,
	// then every change, one WatchEvent (objects) or v1alpha1.Event
	// (events) per line, until the client goes away.
	WatchParam = "watch"
	// KindParam and NameParam filter events to one object.
	KindParam = "kind"
	NameParam = "name"
	// AfterParam lists only events with a larger Seq.
	AfterParam = "after"
	// SelectorParam narrows a list or a watch of objects to those whose
	// labels match a label selector, in the syntax of Kubernetes'
	// labelSelector ("team=platform", "env in (dev,ci)", "!retired").
	SelectorParam = "labelSelector"
)

// Resource is a kind as the CLI and the routes name it.
type Resource struct {
	Kind   string   // Profile
	Plural string   // profiles
	Short  []string // other accepted names: profile, prof
}

// Resources are the kinds the API serves.
var Resources = []Resource{
	{Kind: v1alpha1.KindProfile, Plural: "profiles", Short: []string{"profile", "prof", "pr"}},
	{Kind: v1alpha1.KindWorkspace, Plural: "workspaces", Short: []string{"workspace", "ws"}},
	{Kind: v1alpha1.KindHost, Plural: "hosts", Short: []string{"host"}},
	{Kind: v1alpha1.KindConsumer, Plural: "consumers", Short: []string{"consumer", "cons"}},
	{Kind: v1alpha1.KindAgent, Plural: "agents", Short: []string{"agent", "ag"}},
}

// ResourceFor finds a resource by kind, plural or short name, ignoring
// case.
func ResourceFor(name string) (Resource, bool) {
	for _, r := range Resources {
		if strings.EqualFold(name, r.Kind) || strings.EqualFold(name, r.Plural) {
			return r, true
		}
		for _, s := range r.Short {
			if strings.EqualFold(name, s) {
				return r, true
			}
		}
	}
	return Resource{}, false
}

// Info describes the daemon.
type Info struct {
	Version    string `json:"version"`
	PID        int    `json:"pid"`
	UID        int    `json:"uid"`
	Mode       string `json:"mode"` // user | system
	ConfigDir  string `json:"configDir"`
	StateDir   string `json:"stateDir"`
	Socket     string `json:"socket"`
	Backend    string `json:"backend"`
	CgroupRoot string `json:"cgroupRoot,omitempty"`
	// Ready is set once the config dir's first load is reconciled.
	Ready  bool         `json:"ready"`
	Source SourceStatus `json:"source"`
	// Egress says where the egress proxy listens, when it runs.
	Egress *EgressInfo `json:"egress,omitempty"`
}

// SourceStatus is what the manifest source sees.
type SourceStatus struct {
	Dir         string          `json:"dir"`
	Root        string          `json:"root,omitempty"`
	Missing     bool            `json:"missing,omitempty"`
	Files       int             `json:"files"`
	Objects     int             `json:"objects"`
	Errors      []ManifestError `json:"errors,omitempty"`
	Held        bool            `json:"held,omitempty"`
	HeldObjects int             `json:"heldObjects,omitempty"`
}

// ManifestError is one manifest load error, as loader.Error.
type ManifestError struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Kind    string `json:"kind,omitempty"`
	Name    string `json:"name,omitempty"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// ObjectList answers a list of one resource: full objects (spec and
// status), sorted by name.
type ObjectList struct {
	Kind  string            `json:"kind"`
	Items []json.RawMessage `json:"items"`
}

// Watch event types.
const (
	Added    = "ADDED"
	Modified = "MODIFIED"
	Deleted  = "DELETED"
	// WatchError ends a watch that cannot go on; its Object is an Error.
	WatchError = "ERROR"
)

// WatchEvent is one line of an object watch.
type WatchEvent struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// EventList answers an events query, oldest first.
type EventList struct {
	Items []v1alpha1.Event `json:"items"`
}

// ApplyFile is one manifest file sent for apply.
type ApplyFile struct {
	// Name is the file's name as the user gave it, for messages.
	Name string `json:"name"`
	// Data is the file's content.
	Data []byte `json:"data"`
}

// ApplyRequest asks the daemon to declare objects by writing them into
// its config dir, one file per object.
type ApplyRequest struct {
	Files  []ApplyFile `json:"files"`
	DryRun bool        `json:"dryRun,omitempty"`
	// AllowEmpty confirms that an emptied config dir, which the daemon
	// holds, is meant to be empty.
	AllowEmpty bool `json:"allowEmpty,omitempty"`
}

// Apply actions.
const (
	ActionCreated    = "created"
	ActionConfigured = "configured"
	ActionUnchanged  = "unchanged"
	ActionRefused    = "refused"
	ActionDeleted    = "deleted"
	ActionNotFound   = "not_found"
)

// Outcome is what apply or delete did, or would do, to one object.
type Outcome struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Action string `json:"action"`
	// File is the file inside the config dir that was (or would be)
	// written or removed, or that declares the object when refused.
	File string `json:"file,omitempty"`
	// Reason says why an object was refused.
	Reason string `json:"reason,omitempty"`
}

// ApplyResult answers an apply. When Errors is not empty nothing was
// written.
type ApplyResult struct {
	Outcomes []Outcome       `json:"outcomes"`
	Errors   []ManifestError `json:"errors,omitempty"`
	DryRun   bool            `json:"dryRun,omitempty"`
	// Confirmed is set when AllowEmpty released a held empty config dir.
	Confirmed bool `json:"confirmed,omitempty"`
}

// DeleteRequest asks the daemon to stop declaring objects: by name, every
// object of Kind whose labels match Selector, or every object the files
// declare.
type DeleteRequest struct {
	Kind string `json:"kind,omitempty"`
	Name string `json:"name,omitempty"`
	// Selector is a label selector, as SelectorParam takes it.
	Selector string      `json:"selector,omitempty"`
	Files    []ApplyFile `json:"files,omitempty"`
	DryRun   bool        `json:"dryRun,omitempty"`
}

// DeleteResult answers a delete.
type DeleteResult struct {
	Outcomes []Outcome       `json:"outcomes"`
	Errors   []ManifestError `json:"errors,omitempty"`
	DryRun   bool            `json:"dryRun,omitempty"`
}

// StopRequest asks the daemon to end an agent: SIGTERM to every process
// of its scope, then SIGKILL to the tree once GraceMS milliseconds have
// passed; 0 kills at once.
type StopRequest struct {
	// Agent is the agent's name: its scope.
	Agent   string `json:"agent"`
	GraceMS int64  `json:"graceMS"`
}

// StopResult answers a StopRequest: the signal was sent.
type StopResult struct {
	// Signal is the signal sent now: SIGTERM, or SIGKILL for a grace of 0.
	Signal string `json:"signal"`
}

// RenderRequest asks the daemon to apply JSONPath templates, as kubectl's
// -o jsonpath and -o custom-columns do, to documents marshalctl already
// has. marshalctl sends them rather than link the template engine, whose
// start-up every command, run included, would pay.
type RenderRequest struct {
	// Template, when set, is applied to each document, as
	// k8s.io/client-go/util/jsonpath executes it.
	Template string `json:"template,omitempty"`
	// Columns, when set, are templates whose results in each document
	// are its cells: the values joined by ",", or "<none>".
	Columns []string `json:"columns,omitempty"`
	// Documents are JSON documents: objects, or Lists.
	Documents []json.RawMessage `json:"documents"`
}

// RenderResult answers a RenderRequest, one entry per document.
type RenderResult struct {
	// Outputs are the template's output for each document.
	Outputs []string `json:"outputs,omitempty"`
	// Cells are the columns' cells for each document.
	Cells [][]string `json:"cells,omitempty"`
}

// ConfirmEmptyResult answers a confirmation of an emptied config dir.
type ConfirmEmptyResult struct {
	// Released is set when a hold was released; false when nothing was
	// held.
	Released bool `json:"released"`
}

// Check is one line of doctor's report.
type Check struct {
	// Name is what was checked: "cgroup v2", "systemd", "kernel
	// enforcement: memory".
	Name string `json:"name"`
	// OK says whether it is as it should be.
	OK bool `json:"ok"`
	// Detail says what was found.
	Detail string `json:"detail"`
	// Fix says what to do when not OK.
	Fix string `json:"fix,omitempty"`
}

// Doctor is what this host can enforce and what is missing.
type Doctor struct {
	Backend     string                 `json:"backend"`
	Enforcement []v1alpha1.Enforcement `json:"enforcement"`
	Checks      []Check                `json:"checks"`
}

// Error codes of failed requests.
const (
	CodeNotFound     = "NOT_FOUND"
	CodeInvalid      = "INVALID"
	CodeConflict     = "CONFLICT"
	CodeForbidden    = "FORBIDDEN"
	CodeUnavailable  = "UNAVAILABLE"
	CodeInternal     = "INTERNAL"
	CodeBadRequest   = "BAD_REQUEST"
	CodeNotSupported = "NOT_SUPPORTED"
)

// Error is the body of every failed request.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// RunRequest asks marshald to launch the caller, the process that made
// the request's connection, as an agent in a workspace: on success it is
// moved into the launch's scope, and execs the answer's plan.
type RunRequest struct {
	// Workspace names the workspace.
	Workspace string `json:"workspace"`
	// Argv is the command, argv[0] resolved with the final environment's
	// PATH from the workspace root. Its strings must be UTF-8.
	Argv []string `json:"argv"`
	// PTY reports whether the execution runs on the caller's terminal.
	PTY bool `json:"pty"`
	// TimeoutMS bounds the execution, in milliseconds: its scope is
	// killed when it expires. 0 is none.
	TimeoutMS int64 `json:"timeoutMS,omitempty"`
	// Env is the caller's environment, KEY=VALUE entries as bytes: an
	// environment need not be UTF-8.
	Env [][]byte `json:"env"`
	// Explain asks what the execution would mean and need, without
	// admitting or running anything.
	Explain bool `json:"explain,omitempty"`
}

// RunResult answers a RunRequest: exactly one of Plan, Refusal and
// Explain is set.
type RunResult struct {
	Plan    *ExecPlan `json:"plan,omitempty"`
	Refusal *Refusal  `json:"refusal,omitempty"`
	Explain *Explain  `json:"explain,omitempty"`
}

// ExecPlan is what the caller, already inside its scope, execs.
type ExecPlan struct {
	// Path is the absolute path of the executable, Argv its arguments as
	// given, Env the full environment (bytes) and Dir the working
	// directory: the workspace root.
	Path string   `json:"path"`
	Argv []string `json:"argv"`
	Env  [][]byte `json:"env"`
	Dir  string   `json:"dir"`
	// ID is the launch's 32 hex digits, Scope its scope's unit name.
	ID    string `json:"id"`
	Scope string `json:"scope"`
	// Attempt is the admission attempt bound to the scope, empty when
	// the execution runs unaccounted.
	Attempt string `json:"attempt,omitempty"`
	// Unaccounted, when set, says why an execution of an optional
	// workspace runs without a reservation (resource_unavailable,
	// resource_policy_unsupported, authority_unavailable,
	// admission_unknown).
	Unaccounted string `json:"unaccounted,omitempty"`
}

// Refusal codes of a run: nothing was started.
const (
	RefusalWorkspaceNotReady    = "WORKSPACE_NOT_READY"
	RefusalExecNotAllowed       = "EXEC_NOT_ALLOWED"
	RefusalWorkspaceBusy        = "WORKSPACE_BUSY"
	RefusalResourceUnavailable  = "RESOURCE_UNAVAILABLE"
	RefusalPolicyUnsupported    = "RESOURCE_POLICY_UNSUPPORTED"
	RefusalAuthorityUnavailable = "RESOURCE_AUTHORITY_UNAVAILABLE"
	RefusalAdmissionUnknown     = "ADMISSION_UNKNOWN"
	RefusalIsolationUnsupported = "ISOLATION_UNSUPPORTED"
	RefusalEgressUnavailable    = "EGRESS_UNAVAILABLE"
	RefusalInternal             = "INTERNAL"
	// RefusalForbidden: the caller is an agent whose profile does not
	// grant a run into this workspace (spec.control.run), or a process
	// that counts as the most restricted agent.
	RefusalForbidden = "FORBIDDEN"
)

// Attempt states of a refused run.
const (
	AttemptNotAsked    = "not_asked"
	AttemptNotRecorded = "not_recorded"
	AttemptDenied      = "denied"
	AttemptCancelled   = "cancelled"
	AttemptExpired     = "expired"
	AttemptUnknown     = "unknown"
)

// Refusal is a run refused before anything was started. It holds
// enumerations, identifiers and numbers only.
type Refusal struct {
	// Code is one of the Refusal* codes.
	Code string `json:"code"`
	// Detail is a fixed phrase with numbers: "live process limit reached
	// (8 of 8)", "memory_bytes requested N, free F of T".
	Detail string `json:"detail"`
	// Attempt is the attempt's ID, empty when none was made.
	Attempt string `json:"attempt,omitempty"`
	// Process is the caller's process ID.
	Process int `json:"process"`
	// State is one of the Attempt* states.
	State string `json:"state"`
}

// Explain is what a run would mean and what its admission would need.
type Explain struct {
	// Meaning is the execution meaning, as the admission digest encodes
	// it, and Digest that digest.
	Meaning json.RawMessage `json:"meaning"`
	Digest  string          `json:"digest"`
	// Admission is what admission would need.
	Admission ExplainAdmission `json:"admission"`
}

// ExplainAdmission is what admission of a run would need, and whether the
// host could give it now.
type ExplainAdmission struct {
	// Participation is required, optional or none; none asks nothing.
	Participation string `json:"participation"`
	// Request is what the execution reserves, and Minimum the least
	// level per resource (cpu, memory, pids).
	Request v1alpha1.Amounts  `json:"request"`
	Minimum map[string]string `json:"minimum"`
	// Host is, per resource, the level and method this host gives.
	Host []v1alpha1.Enforcement `json:"host,omitempty"`
	// Supported reports whether the host gives every minimum;
	// Unsupported names the first it does not.
	Supported   bool   `json:"supported"`
	Unsupported string `json:"unsupported,omitempty"`
	// Ready reports whether the authority can decide now.
	Ready bool `json:"ready"`
	// Free and Target are what the authority has free, of what it admits
	// against now.
	Free   v1alpha1.Amounts `json:"free"`
	Target v1alpha1.Amounts `json:"target"`
	// Fits reports whether the request fits what is free now; Shortage
	// names the first resource that does not.
	Fits     bool   `json:"fits"`
	Shortage string `json:"shortage,omitempty"`
	// Limits are the scope limits a launch admitted now would get.
	Limits v1alpha1.Amounts `json:"limits"`
}
