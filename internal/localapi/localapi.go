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

// DeleteRequest asks the daemon to stop declaring objects: by name, or
// every object the files declare.
type DeleteRequest struct {
	Kind   string      `json:"kind,omitempty"`
	Name   string      `json:"name,omitempty"`
	Files  []ApplyFile `json:"files,omitempty"`
	DryRun bool        `json:"dryRun,omitempty"`
}

// DeleteResult answers a delete.
type DeleteResult struct {
	Outcomes []Outcome       `json:"outcomes"`
	Errors   []ManifestError `json:"errors,omitempty"`
	DryRun   bool            `json:"dryRun,omitempty"`
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
