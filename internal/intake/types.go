package intake

import (
	"github.com/marshal-dev/marshal/api/loader"
	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/state"
	"github.com/marshal-dev/marshal/reconcile"
)

// Declaration is the desired state of one object as a source of manifests
// declares it.
type Declaration struct {
	// Object is the declared object, validated and defaulted. It is shared:
	// treat it as read-only.
	Object v1alpha1.Object
	// File is the declaring file's path inside the config directory.
	File string
	// Line is the line of the object's document in File.
	Line int
	// Invalid holds File's current load errors when File no longer loads;
	// Object is then File's last good version of the object.
	Invalid []*loader.Error
	// Conflicts locates ("FILE:LINE") the other declarations of the same
	// kind and name, which lose to this one; for the Host, also the other
	// Hosts, since at most one may be declared.
	Conflicts []string
}

// Change says that Key is now declared as Declaration, or is no longer
// declared when Declaration is nil.
type Change struct {
	Key         reconcile.Key
	Declaration *Declaration
}

// Sink receives declarations.
type Sink interface {
	// Declare receives the changes of one load, sorted by key. Calls come
	// from one goroutine at a time, in order.
	Declare(changes []Change)
}

// Store keeps the last good objects across restarts. *state.DB is one.
type Store interface {
	ForEach(b state.Bucket, fn func(key string, value []byte) error) error
	Write(b state.Bucket, puts map[string][]byte) error
}

// Recorder records events about objects.
type Recorder interface {
	Normal(obj reconcile.Key, reason, message string)
	Warning(obj reconcile.Key, reason, message string)
}

// Status summarizes what a source of manifests sees.
type Status struct {
	// Dir is the config directory as configured; Root is where it leads.
	Dir  string `json:"dir"`
	Root string `json:"root,omitempty"`
	// Missing is set while the directory does not exist.
	Missing bool `json:"missing,omitempty"`
	// Files and Objects count the manifest files and declared objects.
	Files   int `json:"files"`
	Objects int `json:"objects"`
	// Errors are the current load errors of every file, sorted.
	Errors []*loader.Error `json:"errors,omitempty"`
	// Held is set while an emptied directory is held: nothing was deleted.
	Held bool `json:"held,omitempty"`
	// HeldObjects is how many objects the hold keeps declared.
	HeldObjects int `json:"heldObjects,omitempty"`
}
