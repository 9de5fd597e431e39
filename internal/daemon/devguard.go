package daemon

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"syscall"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/controllers"
	"github.com/marshal-dev/marshal/internal/admission"
	"github.com/marshal-dev/marshal/internal/apiserver"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/devguardwire"
	"github.com/marshal-dev/marshal/internal/launch"
	"github.com/marshal-dev/marshal/reconcile"
)

// devguardView is what the DevGuard socket serves (devguardwire.Daemon):
// the admission authority and the launch path, for the Consumers the
// manifests declare. It holds the credentials' digests in force, kept
// equal to the manifests by wireConsumers.
type devguardView struct {
	d *Daemon

	// mu guards the fields that follow.
	mu sync.Mutex
	// consumers are the usable Consumers, by consumer id.
	consumers map[string]servedConsumer
	// admin is the administrator's credential digest, "" for none.
	admin string
	// fingerprint is the SHA-256 of the configuration in force.
	fingerprint string
}

// servedConsumer is what authentication checks of a Consumer.
type servedConsumer struct {
	generation string
	digest     string
	role       admission.Role
}

var _ devguardwire.Daemon = (*devguardView)(nil)

// listenDevGuard opens the DevGuard socket, mode 0600 as the local
// API's is, and the server over the daemon's parts.
func (d *Daemon) listenDevGuard() (err error) {
	if d.cfg.DevGuardSocket == "" {
		return nil
	}
	d.devguardLn, err = apiserver.Listen(d.cfg.DevGuardSocket)
	if err != nil {
		return fmt.Errorf("--devguard-socket %s: %w", d.cfg.DevGuardSocket, err)
	}
	d.closers = append(d.closers, d.devguardLn.Close)
	d.devguard, err = devguardwire.New(devguardwire.Options{
		Daemon: d.dgView, Logger: d.log.With("component", "devguard"), FrameDeadline: d.cfg.DevGuardFrameDeadline,
		Control: d.control.on(surfaceDevGuard),
	})
	return err
}

// wireConsumers keeps the authority's consumers, and the credentials
// authentication checks, equal to the declared Consumers and Host.
func (d *Daemon) wireConsumers() {
	d.dgView = &devguardView{d: d}
	d.stores.Desired.OnChange(func(k reconcile.Key) {
		if k.Kind == v1alpha1.KindConsumer || k.Kind == v1alpha1.KindHost {
			d.dgView.setConsumers()
		}
	})
	d.dgView.setConsumers()
}

// setConsumers judges the declared Consumers and serves the usable ones.
func (v *devguardView) setConsumers() {
	consumers, host := controllers.DeclaredConsumers(v.d.stores.Desired)
	verdicts := controllers.JudgeConsumers(consumers, host)
	var served []admission.Consumer
	byID := map[string]servedConsumer{}
	type fingerprinted struct {
		ID, Generation, Role, Digest string
		MaxInstances                 int64
		Reservation                  admission.Budget
	}
	var config struct {
		Admin, PolicyRevision string
		Consumers             []fingerprinted
	}
	for _, c := range consumers {
		if !verdicts[c.Metadata.Name].Usable {
			continue
		}
		r := c.Spec.ControlReservation
		res := admission.Budget{CPUMilli: uint64(*r.CPUMilli), MemoryBytes: uint64(*r.MemoryBytes), Tasks: uint64(*r.Tasks)}
		served = append(served, admission.Consumer{
			ID: c.ID(), Generation: c.Spec.Generation, Role: admission.Role(c.Spec.Role),
			MaxInstances: int(*c.Spec.MaxInstances), ControlReservation: res,
		})
		byID[c.ID()] = servedConsumer{generation: c.Spec.Generation, digest: c.Spec.CredentialSHA256, role: admission.Role(c.Spec.Role)}
		config.Consumers = append(config.Consumers, fingerprinted{c.ID(), c.Spec.Generation, string(c.Spec.Role), c.Spec.CredentialSHA256, *c.Spec.MaxInstances, res})
	}
	slices.SortFunc(config.Consumers, func(a, b fingerprinted) int { return compare(a.ID, b.ID) })
	if host != nil && host.Spec.DevGuard != nil {
		config.Admin = host.Spec.DevGuard.AdminCredentialSHA256
	}
	config.PolicyRevision = host.PolicyRevision()
	if err := v.d.auth.SetConsumers(served, config.PolicyRevision); err != nil {
		v.d.log.Error("serving the declared consumers", "err", err)
		return
	}
	data, _ := json.Marshal(config)
	sum := sha256.Sum256(data)
	v.mu.Lock()
	defer v.mu.Unlock()
	v.consumers, v.admin, v.fingerprint = byID, config.Admin, hex.EncodeToString(sum[:])
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// digestMatches compares the SHA-256 of secret's 64 characters with want
// in constant time.
func digestMatches(secret devguardwire.Secret, want string) bool {
	sum := sha256.Sum256([]byte(secret.Expose()))
	got := hex.EncodeToString(sum[:])
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

func (v *devguardView) AuthenticateConsumer(consumerID, generation string, secret devguardwire.Secret) (admission.Role, error) {
	v.mu.Lock()
	c, ok := v.consumers[consumerID]
	v.mu.Unlock()
	// The digest is compared even for a consumer not served, so that the
	// time taken says nothing of which consumers exist.
	match := digestMatches(secret, c.digest)
	if !ok || c.generation != generation || !match {
		return "", fmt.Errorf("consumer %q: %w", consumerID, admission.ErrUnauthorized)
	}
	return c.role, nil
}

func (v *devguardView) AuthenticateAdministrator(secret devguardwire.Secret) error {
	v.mu.Lock()
	admin := v.admin
	v.mu.Unlock()
	if !digestMatches(secret, admin) {
		return fmt.Errorf("administrator: %w", admission.ErrUnauthorized)
	}
	return nil
}

// Capabilities states linux_cgroup_v2 while the backend holds a resource
// with a cgroup v2 controller.
func (v *devguardView) Capabilities() []devguardwire.Capability {
	s := v.d.auth.Snapshot()
	if p := s.Plan; p != nil {
		for _, r := range cgroup.AllResources {
			if p.Get(r).Method == cgroup.MethodCgroupV2 {
				return []devguardwire.Capability{devguardwire.CapLinuxCgroupV2}
			}
		}
	}
	return nil
}

// The reasons status gives, in fixed words.
const (
	statusReady       = "registration, admission and fenced launch are open; admission follows the host's capacity and pressure"
	statusNotReady    = "the admission authority cannot decide yet: the host's capacity or enforcement is not known; registration is open"
	statusJournalDown = "the admission journal cannot record; nothing is registered or admitted until it can"
	statusLaunchDown  = "the launch path has not recovered the launches of an earlier run yet; registration and admission are open"
)

func (v *devguardView) Status() devguardwire.Status {
	s := v.d.auth.Snapshot()
	v.mu.Lock()
	fp := v.fingerprint
	v.mu.Unlock()
	st := devguardwire.Status{StorageValidated: true, ConfigurationFingerprint: fp}
	launcherReady := false
	select {
	case <-v.d.launcher.Ready():
		launcherReady = true
	default:
	}
	switch {
	case journalReason(s.NotReady):
		st.Reason = statusJournalDown
	case !s.Ready:
		st.RegistrationReady, st.Reason = true, statusNotReady
	case !launcherReady:
		st.RegistrationReady, st.Reason = true, statusLaunchDown
	default:
		st.RegistrationReady, st.ExecutionReady, st.Reason = true, true, statusReady
	}
	return st
}

func (v *devguardView) Register(ctx context.Context, consumerID, generation, instanceID string, peer admission.Peer) (admission.Principal, error) {
	return v.d.auth.RegisterInstance(ctx, consumerID, generation, instanceID, peer)
}

func (v *devguardView) Registered(consumerID, generation, instanceID string) (admission.Principal, bool) {
	return v.d.auth.Registered(consumerID, generation, instanceID)
}

func (v *devguardView) Admit(ctx context.Context, p admission.Principal, key admission.AttemptKey, digest string, in admission.Intent) (admission.Record, error) {
	return v.d.auth.AdmitKey(ctx, p, key, digest, in)
}

// ofKey passes an answer on for key, or ErrNotFound when its record is of
// another key whose ID is the same: the IDs of two keys collide once in
// 2^128.
func ofKey(key admission.AttemptKey) func(admission.Record, error) (admission.Record, error) {
	return func(r admission.Record, err error) (admission.Record, error) {
		if err == nil && (r.Key == nil || *r.Key != key) {
			return admission.Record{}, fmt.Errorf("attempt %+v: %w", key, admission.ErrNotFound)
		}
		return r, err
	}
}

func (v *devguardView) BeginLaunch(ctx context.Context, p admission.Principal, key admission.AttemptKey) (admission.Launch, error) {
	l, err := v.d.auth.BeginLaunch(ctx, p, key.ID())
	if _, err := ofKey(key)(l.Record, err); err != nil {
		return admission.Launch{}, err
	}
	return l, nil
}

func (v *devguardView) Lookup(ctx context.Context, p admission.Principal, key admission.AttemptKey) (admission.Record, error) {
	return ofKey(key)(v.d.auth.Lookup(ctx, p, key.ID()))
}

func (v *devguardView) Cancel(ctx context.Context, p admission.Principal, key admission.AttemptKey) (admission.Record, error) {
	return ofKey(key)(v.d.auth.Cancel(ctx, p, key.ID()))
}

// AbandonLaunch is the authority's: as in DevGuard, a prepared attempt is
// cancelled, not abandoned (ErrInvalidTransition).
func (v *devguardView) AbandonLaunch(ctx context.Context, p admission.Principal, key admission.AttemptKey, reason admission.AbandonReason) (admission.Record, error) {
	return ofKey(key)(v.d.auth.AbandonLaunch(ctx, p, key.ID(), reason))
}

// Observe settles the attempt on its scope as read now, by the agent
// controller's rule, and answers it as it is then.
func (v *devguardView) Observe(ctx context.Context, p admission.Principal, key admission.AttemptKey) (admission.Record, error) {
	r, err := v.Lookup(ctx, p, key)
	if err != nil || !r.Phase.Charged() {
		return r, err
	}
	if err := v.d.launcher.Observe(ctx, r.ID); err != nil && !errors.Is(err, launch.ErrUnknownLaunch) {
		v.d.log.Warn("observing a consumer's attempt", "attempt", r.ID, "err", err)
	}
	return v.Lookup(ctx, p, key)
}

func (v *devguardView) Terminate(ctx context.Context, p admission.Principal, key admission.AttemptKey, sig syscall.Signal) (admission.Record, devguardwire.Termination, error) {
	r, err := v.Lookup(ctx, p, key)
	if err != nil {
		return admission.Record{}, devguardwire.Termination{}, err
	}
	if r.Scope == "" {
		return admission.Record{}, devguardwire.Termination{}, fmt.Errorf("attempt %+v has no scope to signal: %w", key, admission.ErrInvalidTransition)
	}
	n, complete, err := v.d.launcher.Signal(ctx, r.ID, sig)
	if errors.Is(err, launch.ErrUnknownLaunch) {
		return admission.Record{}, devguardwire.Termination{}, fmt.Errorf("attempt %+v: its scope is not known: %w", key, admission.ErrInvalidTransition)
	}
	if err != nil {
		return admission.Record{}, devguardwire.Termination{}, err
	}
	return r, devguardwire.Termination{Signalled: n, Complete: complete}, nil
}

func (v *devguardView) Launch(ctx context.Context, owner admission.Principal, key admission.AttemptKey, permit admission.Permit, helper *launch.Process) (admission.Run, error) {
	run, err := v.d.launcher.LaunchHelper(ctx, launch.HelperLaunch{Owner: owner, Key: key, Permit: permit, Helper: helper})
	if _, kerr := ofKey(key)(run.Record, err); err == nil && kerr != nil {
		return admission.Run{}, kerr
	}
	return run, err
}
