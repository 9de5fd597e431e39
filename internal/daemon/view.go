package daemon

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/apiserver"
	"github.com/marshal-dev/marshal/internal/applier"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/localapi"
	"github.com/marshal-dev/marshal/internal/source"
	"github.com/marshal-dev/marshal/reconcile"
)

// HostName is the name the Host is shown under when none is declared.
const HostName = "local"

// view is what the local API serves: the stores joined into objects.
type view struct {
	d       *Daemon
	changed map[string]*apiserver.ChangeLog // by kind
	// writing serialises Apply and Delete: each decides from what the
	// config dir declares, which the other changes.
	writing sync.Mutex
}

var _ apiserver.Daemon = (*view)(nil)

func newView(d *Daemon) *view {
	v := &view{d: d, changed: map[string]*apiserver.ChangeLog{}}
	for _, k := range []string{v1alpha1.KindProfile, v1alpha1.KindWorkspace, v1alpha1.KindHost, v1alpha1.KindConsumer, v1alpha1.KindAgent} {
		v.changed[k] = apiserver.NewChangeLog()
	}
	s := d.stores
	kindOf := func(k reconcile.Key) {
		if l := v.changed[k.Kind]; l != nil {
			l.Note(k.Name)
		}
	}
	s.Desired.OnChange(kindOf)
	s.Decls.OnChange(kindOf)
	s.Profiles.OnChange(kindOf)
	s.Workspaces.OnChange(kindOf)
	s.Hosts.OnChange(kindOf)
	s.Consumers.OnChange(kindOf)
	s.Agents.OnChange(kindOf)
	return v
}

func (v *view) Info(ctx context.Context) localapi.Info {
	return v.d.info()
}

func (v *view) List(ctx context.Context, kind string) ([]any, error) {
	if v.changed[kind] == nil {
		return nil, fmt.Errorf("kind %q: %w", kind, apiserver.ErrNotFound)
	}
	var out []any
	s := v.d.stores
	switch kind {
	case v1alpha1.KindAgent:
		for _, e := range s.Agents.List() {
			out = append(out, v.agent(ctx, e.Key, e.Value))
		}
	case v1alpha1.KindHost:
		out = append(out, v.host())
	default:
		for _, obj := range s.Desired.List(kind) {
			out = append(out, v.withStatus(obj))
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return nameOf(out[i]) < nameOf(out[j]) })
	return out, nil
}

// Changed names the Profiles, Workspaces and Consumers that changed:
// their keys in the stores are their names. A Host shown under HostName and an Agent
// are listed again.
func (v *view) Changed(kind string, after uint64) ([]string, uint64, <-chan struct{}, bool) {
	l := v.changed[kind]
	if l == nil {
		return nil, 0, nil, false
	}
	names, last, next, known := l.Since(after)
	return names, last, next, known && (kind == v1alpha1.KindProfile || kind == v1alpha1.KindWorkspace || kind == v1alpha1.KindConsumer)
}

func (v *view) Get(ctx context.Context, kind, name string) (any, error) {
	s := v.d.stores
	key := reconcile.Key{Kind: kind, Name: name}
	switch kind {
	case v1alpha1.KindAgent:
		st, ok := s.Agents.Get(key)
		if !ok {
			return nil, fmt.Errorf("agent %q: %w", name, apiserver.ErrNotFound)
		}
		return v.agent(ctx, key, st), nil
	case v1alpha1.KindHost:
		h := v.host()
		if h.Metadata.Name != name {
			return nil, fmt.Errorf("host %q: %w", name, apiserver.ErrNotFound)
		}
		return h, nil
	case v1alpha1.KindProfile, v1alpha1.KindWorkspace, v1alpha1.KindConsumer:
		obj, ok := s.Desired.Get(key)
		if !ok {
			return nil, fmt.Errorf("%s %q: %w", kind, name, apiserver.ErrNotFound)
		}
		return v.withStatus(obj), nil
	}
	return nil, fmt.Errorf("kind %q: %w", kind, apiserver.ErrNotFound)
}

// withStatus fills a copy of a declared object's status from the stores.
func (v *view) withStatus(obj v1alpha1.Object) v1alpha1.Object {
	s := v.d.stores
	key := reconcile.KeyOf(obj)
	switch o := obj.(type) {
	case *v1alpha1.Profile:
		o.Status, _ = s.Profiles.Get(key)
	case *v1alpha1.Workspace:
		o.Status, _ = s.Workspaces.Get(key)
	case *v1alpha1.Host:
		o.Status, _ = s.Hosts.Get(key)
		o.Status.Admission = v.d.admissionStatus()
	case *v1alpha1.Consumer:
		o.Status, _ = s.Consumers.Get(key)
	}
	return obj
}

// host returns the declared Host, or the default one named HostName.
func (v *view) host() *v1alpha1.Host {
	s := v.d.stores
	for _, obj := range s.Desired.List(v1alpha1.KindHost) {
		return v.withStatus(obj).(*v1alpha1.Host)
	}
	h := v1alpha1.New(v1alpha1.KindHost).(*v1alpha1.Host)
	h.Metadata.Name = HostName
	h.Default()
	h.Metadata.CreationTimestamp = v.d.started
	return v.withStatus(h).(*v1alpha1.Host)
}

// StopAgent asks the agent's tree to end (package agentstop).
func (v *view) StopAgent(ctx context.Context, name string, grace time.Duration) error {
	st, ok := v.d.stores.Agents.Get(reconcile.Key{Kind: v1alpha1.KindAgent, Name: name})
	if !ok {
		return fmt.Errorf("agent %q: %w", name, apiserver.ErrNotFound)
	}
	return v.d.stopper.Stop(ctx, cgroup.Scope{Name: name, Profile: st.Profile, ID: st.ID, Path: st.Path}, grace)
}

// agent builds an Agent, reading its usage now: usage is not polled.
func (v *view) agent(ctx context.Context, key reconcile.Key, st v1alpha1.AgentStatus) *v1alpha1.Agent {
	a := &v1alpha1.Agent{
		TypeMeta: v1alpha1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.KindAgent},
		Metadata: v1alpha1.ObjectMeta{Name: key.Name, CreationTimestamp: st.Since},
		Status:   st,
	}
	if u, err := v.d.backend.Usage(ctx, cgroup.Scope{Name: key.Name, Profile: st.Profile, ID: st.ID, Path: st.Path}); err == nil {
		a.Status.Usage = v1alpha1.AgentUsage{CPUUsec: u.CPU.Microseconds(), MemoryBytes: u.MemoryBytes, Tasks: u.Tasks}
	}
	return a
}

func nameOf(o any) string {
	switch x := o.(type) {
	case v1alpha1.Object:
		return x.GetObjectMeta().Name
	case *v1alpha1.Agent:
		return x.Metadata.Name
	}
	return ""
}

func (v *view) Events(obj reconcile.Key, after uint64) ([]v1alpha1.Event, <-chan struct{}) {
	return v.d.recorder.List(obj, after)
}

func (v *view) Apply(ctx context.Context, req localapi.ApplyRequest) (localapi.ApplyResult, error) {
	v.writing.Lock()
	defer v.writing.Unlock()
	var res localapi.ApplyResult
	if len(req.Files) > 0 {
		root, err := v.configRoot()
		if err != nil {
			return res, err
		}
		if res, err = applier.Apply(ctx, root, v.d.dir, req); err != nil {
			return res, refusedOutside(err)
		}
	}
	if req.AllowEmpty && !req.DryRun && len(res.Errors) == 0 {
		released, err := v.d.source.ConfirmEmpty(ctx)
		if err != nil {
			return res, err
		}
		res.Confirmed = released
	}
	return res, nil
}

func (v *view) Delete(ctx context.Context, req localapi.DeleteRequest) (localapi.DeleteResult, error) {
	v.writing.Lock()
	defer v.writing.Unlock()
	root, err := v.configRoot()
	if err != nil {
		return localapi.DeleteResult{}, err
	}
	res, err := applier.Delete(ctx, root, v.d.dir, req)
	return res, refusedOutside(err)
}

// refusedOutside answers a write the applier refused because its path
// leaves the config dir as a conflict with the dir's state, not as
// marshald's fault.
func refusedOutside(err error) error {
	if errors.Is(err, applier.ErrOutsideDir) {
		return fmt.Errorf("%w: %w", apiserver.ErrConflict, err)
	}
	return err
}

// configRoot is where apply writes: the config dir as it resolves now.
func (v *view) configRoot() (string, error) {
	if v.d.dir == nil {
		return "", v.d.errFromKubernetes()
	}
	if root := v.d.dir.Root(); root != "" {
		return root, nil
	}
	return "", fmt.Errorf("config dir %s does not exist: %w", v.d.cfg.ConfigDir, apiserver.ErrUnavailable)
}

func (v *view) ConfirmEmpty(ctx context.Context) (bool, error) {
	return v.d.source.ConfirmEmpty(ctx)
}

func (v *view) Doctor(ctx context.Context) localapi.Doctor {
	return v.d.doctor(ctx)
}

var (
	_ applier.Declarations = (*source.Source)(nil)
	_ applier.KindLister   = (*source.Source)(nil)
)
