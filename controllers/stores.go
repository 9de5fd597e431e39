package controllers

import (
	"slices"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/reconcile"
)

// LocalHost is the name of the Host status key when no Host is declared.
const LocalHost = "local"

// Stores is the world the controllers read and write. Every store is keyed
// by reconcile.Key; the comment on each field says by which.
type Stores struct {
	// Desired holds the declared objects.
	Desired *reconcile.DesiredStore
	// Decls holds, per declared object's key, where it is declared and
	// whether its file loads; the daemon sets it from the manifest source.
	Decls *reconcile.Store[Declared]
	// Profiles holds each Profile's status, under the Profile's key.
	Profiles *reconcile.Store[v1alpha1.ProfileStatus]
	// Workspaces holds each Workspace's status, under the Workspace's key.
	Workspaces *reconcile.Store[v1alpha1.WorkspaceStatus]
	// Hosts holds the host's status: one entry, under HostKey of the
	// declared Host's name, or of LocalHost when none is declared.
	Hosts *reconcile.Store[v1alpha1.HostStatus]
	// Consumers holds each Consumer's status, under the Consumer's key.
	Consumers *reconcile.Store[v1alpha1.ConsumerStatus]
	// Scopes holds the live marshal scopes as the cgroup backend reports
	// them, under AgentKey of the scope's name. The tree observer of
	// Manager writes it; nothing else should.
	Scopes *reconcile.Store[cgroup.Scope]
	// Agents holds each live scope's agent status, under the same key as
	// Scopes.
	Agents *reconcile.Store[v1alpha1.AgentStatus]
}

// Declared is what the manifest source says about one declared object
// beyond the object itself.
type Declared struct {
	// File is the declaring file's path inside the config directory, and
	// Line the line of the object's document in it.
	File string
	Line int
	// Invalid holds the file's load errors, each "file:line: field: what
	// is wrong", while the file fails to load; the object is then the
	// file's last good version.
	Invalid []string
	// Conflicts locates ("file:line") the other declarations of the same
	// object, which lose to this one.
	Conflicts []string
}

// DeepCopyInto copies in into out, sharing nothing: the copy Stores.Decls
// makes on the way in and out.
func (in *Declared) DeepCopyInto(out *Declared) {
	*out = *in
	out.Invalid = slices.Clone(in.Invalid)
	out.Conflicts = slices.Clone(in.Conflicts)
}

// NewStores returns empty stores.
func NewStores() *Stores {
	return &Stores{
		Desired:    reconcile.NewDesiredStore(),
		Decls:      reconcile.NewStore(reconcile.StoreOptions[Declared]{}),
		Profiles:   reconcile.NewStore(reconcile.StoreOptions[v1alpha1.ProfileStatus]{}),
		Workspaces: reconcile.NewStore(reconcile.StoreOptions[v1alpha1.WorkspaceStatus]{}),
		Hosts:      reconcile.NewStore(reconcile.StoreOptions[v1alpha1.HostStatus]{}),
		Consumers:  reconcile.NewStore(reconcile.StoreOptions[v1alpha1.ConsumerStatus]{}),
		Scopes:     reconcile.NewStore(reconcile.StoreOptions[cgroup.Scope]{}),
		Agents:     reconcile.NewStore(reconcile.StoreOptions[v1alpha1.AgentStatus]{}),
	}
}

// AgentKey returns the key of the agent in scope unit name scope.
func AgentKey(scope string) reconcile.Key {
	return reconcile.Key{Kind: v1alpha1.KindAgent, Name: scope}
}

// ProfileKey returns the key of the Profile named name.
func ProfileKey(name string) reconcile.Key {
	return reconcile.Key{Kind: v1alpha1.KindProfile, Name: name}
}

// WorkspaceKey returns the key of the Workspace named name.
func WorkspaceKey(name string) reconcile.Key {
	return reconcile.Key{Kind: v1alpha1.KindWorkspace, Name: name}
}

// ConsumerKey returns the key of the Consumer named name.
func ConsumerKey(name string) reconcile.Key {
	return reconcile.Key{Kind: v1alpha1.KindConsumer, Name: name}
}

// HostKey returns the key of the Host named name.
func HostKey(name string) reconcile.Key {
	return reconcile.Key{Kind: v1alpha1.KindHost, Name: name}
}
