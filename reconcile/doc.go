// Package reconcile is marshal's reconcile engine: the one-method
// Reconciler contract, the Controller that drives a Reconciler from a
// rate-limited work queue, and the in-memory stores that hold desired and
// observed state and say which key changed.
//
// # The contract
//
// A Reconciler gets a Request naming one object (a Key: kind and name) and
// nothing about why. It reads the desired state (DesiredStore) and the
// observed state (Store) afresh, acts, and returns a Result: done, or
// RequeueAfter a duration. An error retries the key with per-key
// exponential backoff; TerminalError stops the retries until the object
// changes again. Reconcile must be idempotent and is called for deleted
// objects too, so that it can clean up.
//
// # The controller
//
// A Controller owns a work queue of keys and N workers. A key is queued
// once however many events arrive, and never reconciled by two workers at
// once. Enqueue is safe before Start and after it stops. Start blocks until
// its context ends and returns only after every in-flight Reconcile
// returned. Backoff, RequeueAfter and durations use an injected clock
// (k8s.io/utils/clock), so tests step a fake clock instead of sleeping.
// Stats exposes counters, a duration histogram and the unfinished work of
// the calls running, per controller, for the metrics code;
// Options.MetricsProvider receives the queue's own metrics. An idle
// controller sets no timer: nothing runs until a key is enqueued.
//
// # The stores and their events
//
// DesiredStore holds the declared api/v1alpha1 objects and numbers spec
// changes in metadata.generation, the only writer of it: whoever persists
// generations saves GenerationOf and gives it back with Restore after a
// restart. Store[T] holds observed facts (scopes,
// usage, the host probe) and each kind's status, which is observed state
// and so is kept apart from the declaration. Both call their handlers with the key of
// each change, synchronously and after the change is visible, so a change
// costs O(that object). Wire them to controllers with handlers:
//
//	desired.OnChange(reconcile.ForKind(v1alpha1.KindProfile, reconcile.EnqueueKey(profiles)))
//	desired.OnChange(reconcile.ForKind(v1alpha1.KindWorkspace, reconcile.EnqueueKey(workspaces)))
//	// A Profile change reaches the Workspaces that reference it.
//	byProfile := desired.AddIndex(func(o v1alpha1.Object) []reconcile.Key {
//		if w, ok := o.(*v1alpha1.Workspace); ok {
//			return []reconcile.Key{{Kind: v1alpha1.KindProfile, Name: w.Spec.Profile}}
//		}
//		return nil
//	})
//	desired.OnChange(reconcile.ForKind(v1alpha1.KindProfile,
//		reconcile.EnqueueMapped(workspaces, byProfile.Referrers)))
//
// Then enqueue every existing key once (a relist) and Start each
// controller in its own goroutine under one context.
//
// # What it is not
//
// The package knows nothing of what the kinds mean, of files, cgroups or
// the admission authority: sources (the manifest watcher, the cgroup tree
// observer) fill the stores, and controllers act. The stores live in memory
// only; what must survive a restart (last good manifests, the journal) is
// persisted by its owner, and everything else is rebuilt by a relist. It
// writes no status, conditions or events itself, and it is not a cache of
// a remote API server.
package reconcile
