// Package controllers holds marshald's controllers and the world they
// share: profile (a slice per Profile with its limits, read back, drift
// corrected, orphans policy applied on deletion), workspace (Ready while
// its root is a directory and its profile is declared), agent (a status
// per live marshal scope, removal of emptied scopes, start-up garbage
// collection, orphans), host (capacity, declared or measured, and what
// the cgroup backend can enforce here) and consumer (Ready while a
// Consumer's id and credential are its own, so that it can authenticate
// on the DevGuard socket).
//
// Each controller is a reconcile.Reconciler driven by a reconcile.Controller.
// Setup wires them to the stores of Stores so that a change enqueues
// exactly the keys it affects, and Manager.Start runs them together with
// the tree observer, which keeps Stores.Scopes equal to what the cgroup
// backend reports.
//
// # Status, conditions and events
//
// Every status carries observedGeneration (the object's and each
// condition's) from the declared object's metadata.generation, and
// Kubernetes-style conditions set with SetCondition. A condition whose
// status or reason changes records exactly one event, before the status
// showing it is stored: Normal when the condition becomes good, Warning
// when it becomes bad, with the condition's reason and message. A
// condition that first appears bad records a Warning; one that first
// appears good records nothing, so that a restart, which observes every
// object afresh, records events only for the objects that need attention.
// A reconcile that changes no condition records nothing.
//
// Invalid and Conflict come from Stores.Decls: absent while the object's
// file has always loaded (or it was never declared twice), True while it
// fails (or conflicts), and False once it loads again (or the conflict is
// gone), so that lastTransitionTime says when it was fixed.
//
// # What it is not
//
// The package does not read manifests (the manifest source fills
// Stores.Desired and Stores.Decls), does not serve the API, and does not
// launch agents or poll their usage: the API reads usage on request.
// Statuses live in memory; a restart rebuilds them by reconciling
// everything once.
package controllers
