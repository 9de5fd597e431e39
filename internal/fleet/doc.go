// Package fleet makes marshald one host of a fleet whose manifests live in
// a Kubernetes API server: its Source lists and watches the marshal.dev
// kinds there and declares them as the config dir's source does, and each
// host reports there what is its own, as kubelet does its Node: the status
// of its Host object, a Lease as its heartbeat, and Events.
//
// The Source runs one client-go reflector per kind (Profiles, Workspaces
// and Consumers picked by a label selector, the Host by this host's name)
// into a store of its own, so that a list arrives whole: every object is
// loaded strictly by package loader, as a file would be, into a
// intake.Feed per kind, which keeps the declarations' rules (last good
// versions, the Invalid condition, the hold of an emptying). An object
// deleted through a watch is deleted; a list that comes back empty where
// objects were (an API server restored from an empty backup, a wrong
// selector) is held until a person confirms. An API server that cannot be
// reached changes nothing: the reflectors retry with backoff and relist
// when it answers, and the last good objects are persisted, so that a
// restart during an outage declares them again.
//
// A host's credential names it, as a kubelet's names its node: user
// marshal:host:<host name> in group marshal:hosts. VerifyIdentity asks
// the API who the credential is (a SelfSubjectReview) and refuses one
// that names another host or none, and dist/kubernetes's admission policy
// refuses such a user every write to what is not its own.
//
// Writers report each host's own state: HostStatus applies the status of
// the Host named after the host (server-side apply, one field manager per
// host), registering that Host, with an empty spec, when the API holds
// none; Heartbeat renews the host's Lease, and Events forwards the events
// recorded on the host as events.k8s.io/v1 Events whose reporting
// instance is the host. None of them writes an object another host owns,
// and none of them polls: each writes when what it reports changed, at
// most once per interval.
//
// This package does not reconcile anything: the daemon's controllers do,
// from the declarations, whichever source they come from.
package fleet
