package devguardwire

import (
	"context"
	"syscall"

	"github.com/marshal-dev/marshal/internal/admission"
	"github.com/marshal-dev/marshal/internal/launch"
)

// Daemon is what the DevGuard wire asks of marshald, in marshald's own
// terms: package daemon implements it over the admission authority, the
// launch path and the declared Consumers, and this package maps its
// answers and errors (admission's and launch's sentinels) onto DevGuard's
// records and codes. The wire knows nothing of the kernel; the Daemon
// nothing of frames.
type Daemon interface {
	// Capabilities returns what the authority can do now beyond what
	// every hello states: CapLinuxCgroupV2 while a resource is held by a
	// cgroup v2 controller.
	Capabilities() []Capability
	// AuthenticateConsumer returns the role of a consumer whose
	// credential is generation and secret, or admission.ErrUnauthorized.
	AuthenticateConsumer(consumerID, generation string, secret Secret) (admission.Role, error)
	// AuthenticateAdministrator accepts the administrator's secret, or
	// returns admission.ErrUnauthorized.
	AuthenticateAdministrator(secret Secret) error
	// Status says what the authority can do now.
	Status() Status
	// Register registers the instance of a consumer for its process, the
	// peer: admission.Authority.RegisterInstance.
	Register(ctx context.Context, consumerID, generation, instanceID string, peer admission.Peer) (admission.Principal, error)
	// Registered returns the principal of an instance registered since
	// marshald started, for its launch helper.
	Registered(consumerID, generation, instanceID string) (admission.Principal, bool)
	// Admit admits an attempt of p's: admission.Authority.AdmitKey.
	Admit(ctx context.Context, p admission.Principal, key admission.AttemptKey, digest string, intent admission.Intent) (admission.Record, error)
	// BeginLaunch, Lookup, Cancel and AbandonLaunch are the authority's,
	// for p's attempt key; an attempt of another key is
	// admission.ErrNotFound.
	BeginLaunch(ctx context.Context, p admission.Principal, key admission.AttemptKey) (admission.Launch, error)
	Lookup(ctx context.Context, p admission.Principal, key admission.AttemptKey) (admission.Record, error)
	Cancel(ctx context.Context, p admission.Principal, key admission.AttemptKey) (admission.Record, error)
	AbandonLaunch(ctx context.Context, p admission.Principal, key admission.AttemptKey, reason admission.AbandonReason) (admission.Record, error)
	// Observe settles p's attempt on evidence of its scope read now, as
	// the agent controller would, and returns it.
	Observe(ctx context.Context, p admission.Principal, key admission.AttemptKey) (admission.Record, error)
	// Terminate signals every process of the scope of p's attempt; an
	// attempt without a scope is admission.ErrInvalidTransition. The
	// attempt's phase does not change.
	Terminate(ctx context.Context, p admission.Principal, key admission.AttemptKey, sig syscall.Signal) (admission.Record, Termination, error)
	// Launch launches the attempt of owner's for its helper, the peer,
	// pinned (the Daemon owns it from then on): the helper must be
	// owner's live child of the same uid and present the permit; its
	// scope is made with the helper in it, bound on its limits read back,
	// and the run authorized. Run.MayExec is true once only.
	Launch(ctx context.Context, owner admission.Principal, key admission.AttemptKey, permit admission.Permit, helper *launch.Process) (admission.Run, error)
}

// Status is what status answers.
type Status struct {
	StorageValidated  bool
	RegistrationReady bool
	ExecutionReady    bool
	// Reason says so in a fixed sentence: never text from anywhere else.
	Reason string
	// ConfigurationFingerprint is the SHA-256 of the configuration in
	// force: the Host's devguard section and the usable Consumers.
	ConfigurationFingerprint string
}

// Termination is what terminate did.
type Termination struct {
	// Signalled counts the processes signalled.
	Signalled int
	// Complete reports whether every process of the scope was signalled.
	Complete bool
}
