package devguardtest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// The types of the contract, as its records serialize them.

type Key struct {
	ConsumerID         string `json:"consumer_id"`
	ConsumerGeneration string `json:"consumer_generation"`
	AttemptID          string `json:"attempt_id"`
}

type Budget struct {
	CPUMilli    uint64 `json:"cpu_milli"`
	MemoryBytes uint64 `json:"memory_bytes"`
	Tasks       uint64 `json:"tasks"`
}

type Levels struct {
	CPU    string `json:"cpu"`
	Memory string `json:"memory"`
	PIDs   string `json:"pids"`
}

type Intent struct {
	Profile   string `json:"profile"`
	Requested Budget `json:"requested"`
	Minimum   Levels `json:"minimum"`
}

type Admission struct {
	Key             Key    `json:"key"`
	ExecutionDigest string `json:"execution_digest"`
	Intent          Intent `json:"intent"`
}

type Process struct {
	BootID     string `json:"boot_id"`
	PID        uint32 `json:"pid"`
	StartTicks uint64 `json:"start_ticks"`
}

type Instance struct {
	InstanceID string  `json:"instance_id"`
	Process    Process `json:"process"`
}

type Time struct {
	BootID      string `json:"boot_id"`
	MonotonicMS uint64 `json:"monotonic_ms"`
}

type Reservation struct {
	LeaseID           string `json:"lease_id"`
	Quantities        Budget `json:"quantities"`
	PreparedAt        Time   `json:"prepared_at"`
	PrepareDeadlineMS uint64 `json:"prepare_deadline_ms"`
}

type Planned struct {
	Level  string `json:"level"`
	Method string `json:"method"`
}

type Plan struct {
	ScopeKind string  `json:"scope_kind"`
	CPU       Planned `json:"cpu"`
	Memory    Planned `json:"memory"`
	PIDs      Planned `json:"pids"`
}

type Scope struct {
	Kind    string  `json:"kind"`
	ScopeID string  `json:"scope_id"`
	Root    Process `json:"root"`
}

type Applied struct {
	Scope      Scope  `json:"scope"`
	Plan       Plan   `json:"plan"`
	Quantities Budget `json:"quantities"`
	CPU        string `json:"cpu"`
	Memory     string `json:"memory"`
	PIDs       string `json:"pids"`
	ObservedAt Time   `json:"observed_at"`
}

// Record is an attempt record: every field of the contract.
type Record struct {
	Key                Key          `json:"key"`
	RequestFingerprint string       `json:"request_fingerprint"`
	Owner              Instance     `json:"owner"`
	PolicyRevision     string       `json:"policy_revision"`
	Phase              string       `json:"phase"`
	Reservation        *Reservation `json:"reservation"`
	Plan               *Plan        `json:"plan"`
	Scope              *Scope       `json:"scope"`
	Applied            *Applied     `json:"applied"`
	Denial             *string      `json:"denial"`
	TrackingLost       bool         `json:"tracking_lost"`
	ReleaseReason      *string      `json:"release_reason"`
}

// KnownNotStarted is the contract's: denied, cancelled, expired, or
// released with no helper created.
func (r Record) KnownNotStarted() bool {
	switch r.Phase {
	case "denied", "cancelled", "expired":
		return true
	}
	return r.Phase == "released" && r.ReleaseReason != nil && *r.ReleaseReason == "no_helper_created"
}

type Status struct {
	StorageValidated         bool   `json:"storage_validated"`
	RegistrationReady        bool   `json:"registration_ready"`
	ExecutionReady           bool   `json:"execution_ready"`
	Reason                   string `json:"reason"`
	ConfigurationFingerprint string `json:"configuration_fingerprint"`
}

type Grant struct {
	Attempt Record  `json:"attempt"`
	Permit  *string `json:"permit"`
}

type Authorization struct {
	Attempt Record `json:"attempt"`
	MayExec bool   `json:"may_exec"`
}

type Termination struct {
	Attempt   Record `json:"attempt"`
	Signalled uint32 `json:"signalled"`
	Complete  bool   `json:"complete"`
}

// Consumer is a consumer's credential.
func Consumer(id, generation, secret string) map[string]any {
	return map[string]any{"kind": "consumer", "consumer_id": id, "generation": generation, "secret": secret}
}

// Administrator is the administrator's credential.
func Administrator(secret string) map[string]any {
	return map[string]any{"kind": "administrator", "secret": secret}
}

// Authenticate returns the role granted.
func (c *Client) Authenticate(credential map[string]any) (string, error) {
	var v struct {
		Role string `json:"role"`
	}
	err := c.Call("authenticate", map[string]any{"credential": credential}, "authenticated", &v)
	return v.Role, err
}

func (c *Client) Status() (Status, error) {
	var s Status
	return s, c.Call("status", nil, "status", &s)
}

func (c *Client) Register(instanceID string) (Instance, error) {
	var v struct {
		Instance Instance `json:"instance"`
	}
	err := c.Call("register", map[string]any{"instance_id": instanceID}, "registered", &v)
	return v.Instance, err
}

func (c *Client) attempt(method string, params any) (Record, error) {
	var r Record
	if err := c.Call(method, params, "attempt", &r); err != nil {
		return Record{}, err
	}
	return r, CheckRecordFields(c.Raw)
}

func (c *Client) Admit(a Admission) (Record, error) {
	return c.attempt("admit", map[string]any{"request": a})
}

func (c *Client) BeginLaunch(k Key) (Grant, error) {
	var g Grant
	if err := c.Call("begin_launch", map[string]any{"key": k}, "launch_granted", &g); err != nil {
		return Grant{}, err
	}
	var raw struct {
		Attempt json.RawMessage `json:"attempt"`
	}
	_ = json.Unmarshal(c.Raw, &raw)
	return g, CheckRecordFields(raw.Attempt)
}

func (c *Client) Lookup(k Key) (Record, error) { return c.attempt("lookup", map[string]any{"key": k}) }
func (c *Client) Cancel(k Key) (Record, error) { return c.attempt("cancel", map[string]any{"key": k}) }
func (c *Client) Observe(k Key) (Record, error) {
	return c.attempt("observe", map[string]any{"key": k})
}

func (c *Client) AbandonLaunch(k Key, reason string) (Record, error) {
	return c.attempt("abandon_launch", map[string]any{"key": k, "reason": reason})
}

func (c *Client) Terminate(k Key, signal string) (Termination, error) {
	var t Termination
	return t, c.Call("terminate", map[string]any{"key": k, "signal": signal}, "terminated", &t)
}

// Launch presents a grant as its helper would.
func (c *Client) Launch(k Key, instanceID, permit string) (Authorization, error) {
	var a Authorization
	return a, c.Call("launch", map[string]any{"key": k, "instance_id": instanceID, "permit": permit}, "launch_authorized", &a)
}

// recordFields are the fields of the contract's AttemptRecord and of the
// objects in it; every one must be there, nothing else may.
var recordFields = map[string][]string{
	"":            {"key", "request_fingerprint", "owner", "policy_revision", "phase", "reservation", "plan", "scope", "applied", "denial", "tracking_lost", "release_reason"},
	"key":         {"consumer_id", "consumer_generation", "attempt_id"},
	"owner":       {"instance_id", "process"},
	"process":     {"boot_id", "pid", "start_ticks"},
	"reservation": {"lease_id", "quantities", "prepared_at", "prepare_deadline_ms"},
	"quantities":  {"cpu_milli", "memory_bytes", "tasks"},
	"prepared_at": {"boot_id", "monotonic_ms"},
	"observed_at": {"boot_id", "monotonic_ms"},
	"plan":        {"scope_kind", "cpu", "memory", "pids"},
	"scope":       {"kind", "scope_id", "root"},
	"root":        {"boot_id", "pid", "start_ticks"},
	"applied":     {"scope", "plan", "quantities", "cpu", "memory", "pids", "observed_at"},
}

// planned are the objects of a plan's resources.
var planned = []string{"level", "method"}

// CheckRecordFields checks that raw, a record as it came, has every
// field of the contract, optional ones written null, and nothing more.
func CheckRecordFields(raw json.RawMessage) error {
	return checkFields(raw, "", "record")
}

func checkFields(raw json.RawMessage, name, path string) error {
	want, ok := recordFields[name]
	if name == "cpu" || name == "memory" || name == "pids" {
		want, ok = planned, true
	}
	if !ok {
		return nil
	}
	if string(raw) == "null" {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("%s: %v: %w", path, err, ErrBadAnswer)
	}
	var got []string
	for k := range m {
		got = append(got, k)
	}
	slices.Sort(got)
	w := slices.Clone(want)
	slices.Sort(w)
	if !slices.Equal(got, w) {
		return fmt.Errorf("%s has fields %s, want %s: %w", path, strings.Join(got, ","), strings.Join(w, ","), ErrBadAnswer)
	}
	for k, v := range m {
		if name == "applied" && (k == "cpu" || k == "memory" || k == "pids") {
			continue // an application state, a string
		}
		if err := checkFields(v, k, path+"."+k); err != nil {
			return err
		}
	}
	return nil
}
