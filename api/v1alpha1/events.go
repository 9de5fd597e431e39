package v1alpha1

import "time"

// EventType says whether an event is routine or needs attention.
type EventType string

// Event types, as in Kubernetes.
const (
	EventNormal  EventType = "Normal"
	EventWarning EventType = "Warning"
)

// ObjectReference names an object an event is about.
type ObjectReference struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// Event reports something that happened to an object: a condition that
// changed, a manifest that stopped loading, an agent that was stopped.
// Repeats of the same event are counted, not stored again. Events are
// written by marshald and never declared.
type Event struct {
	// Seq orders events: a later event, or a repeat, has a larger Seq.
	Seq uint64 `json:"seq"`
	// Type is Normal or Warning.
	Type EventType `json:"type"`
	// Object is what the event is about.
	Object ObjectReference `json:"object"`
	// Reason is a CamelCase word saying what happened.
	Reason string `json:"reason"`
	// Message says what happened in words.
	Message string `json:"message"`
	// Count is how many times it happened.
	Count int64 `json:"count"`
	// FirstSeen and LastSeen are when it first and last happened.
	FirstSeen time.Time `json:"firstSeen"`
	LastSeen  time.Time `json:"lastSeen"`
}
