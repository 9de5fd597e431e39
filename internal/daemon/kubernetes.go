package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/controllers"
	"github.com/marshal-dev/marshal/internal/apiserver"
	"github.com/marshal-dev/marshal/internal/fleet"
	"github.com/marshal-dev/marshal/internal/intake"
	"github.com/marshal-dev/marshal/internal/localapi"
	"github.com/marshal-dev/marshal/internal/source"
	"github.com/marshal-dev/marshal/reconcile"
)

// Sources of manifests.
const (
	SourceDir        = "dir"
	SourceKubernetes = "kubernetes"
)

// KubernetesConfig is how marshald takes its manifests from a Kubernetes
// API server (--source kubernetes) and reports its state there.
type KubernetesConfig struct {
	// Kubeconfig is the client configuration; empty: what kubectl uses.
	Kubeconfig string
	// HostName names this host: its Host object, its Lease, the reporting
	// instance of its events. Empty: the machine's host name.
	HostName string
	// Selector picks the Profiles, Workspaces and Consumers this host
	// takes, as a label selector. Empty: all.
	Selector string
	// LeaseNamespace holds the hosts' Leases.
	LeaseNamespace string
	// LeaseDuration is how long a renewal of the Lease holds.
	LeaseDuration time.Duration
	// StatusInterval is the least time between two writes of the Host's
	// status.
	StatusInterval time.Duration
	// RegisterHost creates this host's Host object, with an empty spec,
	// when the API holds none.
	RegisterHost bool
}

// identityTimeout bounds how long marshald waits at start for the API to
// say who its credential is; without an answer it starts, and writes
// nothing to the API until it has one.
const identityTimeout = 10 * time.Second

// manifestSource is where the declared objects come from: the config dir
// (*source.Source) or a Kubernetes API server (*fleet.Source).
type manifestSource interface {
	Start(ctx context.Context) error
	Synced() <-chan struct{}
	Status() intake.Status
	ConfirmEmpty(ctx context.Context) (bool, error)
}

var (
	_ manifestSource = (*source.Source)(nil)
	_ manifestSource = (*fleet.Source)(nil)
)

func kubernetesFlags(f *pflag.FlagSet, cfg *Config) {
	k := &cfg.Kubernetes
	f.StringVar(&cfg.Source, "source", SourceDir, "where manifests come from: dir (the config dir) or kubernetes (an API server)")
	f.StringVar(&k.Kubeconfig, "kubeconfig", "", "with --source kubernetes: the kubeconfig file (default: as kubectl, or in-cluster)")
	f.StringVar(&k.HostName, "host-name", "", "with --source kubernetes: this host's name, and its Host object's (default: the host name)")
	f.StringVar(&k.Selector, "selector", "", "with --source kubernetes: the label selector of the Profiles, Workspaces and Consumers this host takes, such as marshal.dev/pool=ci")
	f.StringVar(&k.LeaseNamespace, "lease-namespace", "marshal-system", "with --source kubernetes: the namespace of the hosts' Leases")
	f.DurationVar(&k.LeaseDuration, "lease-duration", 40*time.Second, "with --source kubernetes: how long a renewal of the host's Lease holds; renewed every quarter of it")
	f.DurationVar(&k.StatusInterval, "status-interval", 10*time.Second, "with --source kubernetes: the least time between two writes of the Host's status")
	f.BoolVar(&k.RegisterHost, "register-host", true, "with --source kubernetes: create this host's Host object, with an empty spec, when none is declared")
}

// validateSource reports a --source configuration marshald cannot run
// with.
func (c Config) validateSource() error {
	switch c.Source {
	case "", SourceDir:
		return nil
	case SourceKubernetes:
	default:
		return fmt.Errorf("--source %q: want dir or kubernetes", c.Source)
	}
	var errs []error
	if _, err := labels.Parse(c.Kubernetes.Selector); err != nil {
		errs = append(errs, fmt.Errorf("--selector: %w", err))
	}
	if c.Kubernetes.HostName != "" {
		errs = append(errs, fleet.CheckHostName(c.Kubernetes.HostName))
	}
	return errors.Join(errs...)
}

// kubernetes is what marshald runs with --source kubernetes.
type kubernetes struct {
	client   dynamic.Interface
	source   *fleet.Source
	hostName string
	// verified: the API said the credential names this host.
	verified bool
}

// openKubernetes makes the source a Kubernetes API server's. A
// credential the API says names another host, or none, is refused.
func (d *Daemon) openKubernetes(ctx context.Context, sink intake.Sink) error {
	k := d.cfg.Kubernetes
	klog.SetSlogLogger(d.log.With("component", "client-go"))
	rc, err := fleet.RESTConfig(k.Kubeconfig)
	if err != nil {
		return err
	}
	client, err := dynamic.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	host := k.HostName
	if host == "" {
		if host, err = fleet.DefaultHostName(); err != nil {
			return err
		}
	}
	d.kube = &kubernetes{client: client, hostName: host}
	if err := d.verifyIdentity(ctx); err != nil {
		return err
	}
	sel, _ := labels.Parse(k.Selector)
	d.kube.source = fleet.New(fleet.Options{
		Client: client, Server: rc.Host, HostName: host, Selector: sel,
		Sink: sink, Store: d.db, Recorder: d.recorder, Logger: d.log,
	})
	d.source = d.kube.source
	return nil
}

// verifyIdentity asks the API who the credential is, and refuses one
// that does not name this host. An API that does not answer in time is
// asked again by runKubernetes before anything is written.
func (d *Daemon) verifyIdentity(ctx context.Context) error {
	k := d.kube
	ctx, cancel := context.WithTimeout(ctx, identityTimeout)
	defer cancel()
	id, err := fleet.VerifyIdentity(ctx, k.client, k.hostName)
	switch {
	case errors.Is(err, fleet.ErrIdentity):
		return err
	case err != nil:
		return nil // runKubernetes asks again, and says why it waits
	}
	k.verified = true
	d.noteIdentity(id)
	return nil
}

// noteIdentity logs who this host is in the API.
func (d *Daemon) noteIdentity(id fleet.Identity) {
	if !id.InHostsGroup() {
		d.log.Warn("the credential is not in the group dist/kubernetes binds marshald's role to", "user", id.User, "group", fleet.HostsGroup)
	}
	d.log.Info("the API knows this host by its credential", "user", id.User, "host", d.kube.hostName)
}

// runKubernetes reports this host's state to the API server until ctx
// ends: its Host's status as it changes, its Lease, its events. It
// writes nothing until the API has said the credential names this host.
func (d *Daemon) runKubernetes(ctx context.Context) error {
	k := d.kube
	events := fleet.NewEvents(fleet.EventsOptions{
		Client: k.client, HostName: k.hostName, Log: d.recorder, UID: k.source.UID, Logger: d.log,
	})
	if !k.verified {
		id, err := fleet.AwaitIdentity(ctx, k.client, k.hostName, d.clock, 10*time.Second, d.log)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		d.noteIdentity(id)
	}
	status := fleet.NewHostStatus(fleet.HostStatusOptions{
		Client: k.client, HostName: k.hostName, Status: d.fleetHostStatus,
		Interval: d.cfg.Kubernetes.StatusInterval, Register: d.cfg.Kubernetes.RegisterHost, Logger: d.log,
	})
	heartbeat := fleet.NewHeartbeat(fleet.HeartbeatOptions{
		Client: k.client, HostName: k.hostName, Namespace: d.cfg.Kubernetes.LeaseNamespace,
		Duration: d.cfg.Kubernetes.LeaseDuration, Logger: d.log,
	})
	var wg sync.WaitGroup
	errs := make([]error, 3)
	wg.Go(func() {
		// Before the first list, there is no Host to write to yet.
		select {
		case <-k.source.Synced():
			errs[0] = status.Start(ctx)
		case <-ctx.Done():
		}
	})
	wg.Go(func() { errs[1] = heartbeat.Start(ctx) })
	wg.Go(func() { errs[2] = events.Start(ctx) })
	wg.Go(func() { d.followStatus(ctx, status.Changed) })
	wg.Wait()
	return errors.Join(errs...)
}

// followStatus calls changed whenever the Host's status may have: an
// object's status, an agent, the admission authority.
func (d *Daemon) followStatus(ctx context.Context, changed func()) {
	c := d.view.changed
	logs := [...]*apiserver.ChangeLog{
		c[v1alpha1.KindHost], c[v1alpha1.KindProfile], c[v1alpha1.KindWorkspace], c[v1alpha1.KindConsumer], c[v1alpha1.KindAgent],
	}
	var after [len(logs)]uint64
	var next [len(logs)]<-chan struct{}
	for {
		for i, l := range logs {
			_, after[i], next[i], _ = l.Since(after[i])
		}
		select {
		case <-ctx.Done():
			return
		case <-next[0]:
		case <-next[1]:
		case <-next[2]:
		case <-next[3]:
		case <-next[4]:
		}
		changed()
	}
}

// maxNotReady bounds the objects the Host's status lists as not Ready.
const maxNotReady = 100

// fleetHostStatus is the status of this host's Host object: the local
// view's, with the live agents per workspace and the objects that are
// not Ready.
func (d *Daemon) fleetHostStatus() v1alpha1.HostStatus {
	st := d.view.host().Status
	s := d.stores
	for _, e := range s.Workspaces.List() {
		if e.Value.Live > 0 {
			st.Workspaces = append(st.Workspaces, v1alpha1.WorkspaceAgents{Workspace: e.Key.Name, Live: e.Value.Live})
		}
	}
	st.Agents = int64(len(s.Agents.List()))
	notReady := func(kind string, conds []v1alpha1.Condition, name string) {
		if c := controllers.FindCondition(conds, v1alpha1.ConditionReady); c == nil || c.Status != v1alpha1.ConditionTrue {
			st.NotReady = append(st.NotReady, v1alpha1.ObjectConditions{Kind: kind, Name: name, Conditions: conds})
		}
	}
	for _, kind := range []string{v1alpha1.KindConsumer, v1alpha1.KindProfile, v1alpha1.KindWorkspace} {
		for _, obj := range s.Desired.List(kind) {
			key := reconcile.KeyOf(obj)
			var conds []v1alpha1.Condition
			switch kind {
			case v1alpha1.KindConsumer:
				c, _ := s.Consumers.Get(key)
				conds = c.Conditions
			case v1alpha1.KindProfile:
				p, _ := s.Profiles.Get(key)
				conds = p.Conditions
			default:
				w, _ := s.Workspaces.Get(key)
				conds = w.Conditions
			}
			notReady(kind, conds, key.Name)
		}
	}
	slices.SortFunc(st.NotReady, func(a, b v1alpha1.ObjectConditions) int {
		return reconcile.CompareKeys(reconcile.Key{Kind: a.Kind, Name: a.Name}, reconcile.Key{Kind: b.Kind, Name: b.Name})
	})
	if len(st.NotReady) > maxNotReady {
		st.NotReady = st.NotReady[:maxNotReady]
	}
	return st
}

// manifestsFrom names where the manifests come from.
func (d *Daemon) manifestsFrom() string {
	if d.kube != nil {
		return "kubernetes " + d.kubernetesServer()
	}
	return d.cfg.ConfigDir
}

// kubernetesServer names the API server in messages.
func (d *Daemon) kubernetesServer() string {
	return d.kube.source.Status().Dir
}

// errFromKubernetes refuses a write to the config dir while the manifests
// come from an API server.
func (d *Daemon) errFromKubernetes() error {
	return fmt.Errorf("%w: marshald takes its manifests from the Kubernetes API at %s: change them there, with kubectl",
		apiserver.ErrConflict, d.kubernetesServer())
}

// kubernetesCheck says whether the API server answers and what this host
// takes from it.
func (d *Daemon) kubernetesCheck() localapi.Check {
	st := d.source.Status()
	reachable, failure := d.kube.source.Reachable()
	c := localapi.Check{Name: "kubernetes", OK: reachable && len(st.Errors) == 0 && !st.Held}
	switch {
	case !reachable && failure != "":
		c.Detail = fmt.Sprintf("%s cannot be reached (%s); %d objects are kept from the last good state", st.Dir, failure, st.Objects)
		c.Fix = "check the API server and --kubeconfig"
	case !reachable:
		c.Detail, c.Fix = st.Dir+" has not answered yet", "check the API server and --kubeconfig"
	case st.Held:
		c.Detail = fmt.Sprintf("a list of %s came back empty; %d objects are held", st.Dir, st.HeldObjects)
		c.Fix = "restore the objects, or confirm with marshalctl apply --allow-empty"
	case len(st.Errors) > 0:
		c.Detail = fmt.Sprintf("%d objects do not load, first: %s", len(st.Errors), st.Errors[0].Error())
		c.Fix = "fix them in the API (kubectl edit)"
	default:
		c.Detail = fmt.Sprintf("%s: %d objects for host %s", st.Dir, st.Objects, d.kube.hostName)
	}
	return c
}
