// Package intake is where declared manifests enter marshald, whatever
// their source: the config directory's files (package source) and the
// objects of a Kubernetes API (package fleet) both hand a Feed whole
// units, each as it loads now, through Feed.Declare.
//
// A Feed keeps the rules of declaration, alike for every source: which
// unit's object wins a kind and name, the single Host, the last good
// objects of a unit that stops loading (persisted, so that a restart
// keeps them), and the hold of an emptying until its origin declares
// objects again or a person confirms it. It tells a Sink exactly the
// objects whose declaration changed.
//
// The Declarer is marshald's Sink: it stamps creation times and
// generations on the declared objects, keeps them across restarts and
// crashes (generations.go says what a generation record guarantees), and
// sets the objects in the stores the controllers reconcile.
package intake
