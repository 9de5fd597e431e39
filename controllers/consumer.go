package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/reconcile"
)

// ConsumerVerdict says whether a declared Consumer can authenticate, and
// why not.
type ConsumerVerdict struct {
	// Usable is true when its id and its credential are its own.
	Usable bool
	// Reason and Message say why not, for its Ready condition.
	Reason, Message string
}

// JudgeConsumers says, per Consumer name, whether each of consumers can
// authenticate: its consumer id must be declared by no other Consumer and
// its credential digest must be no other Consumer's and not the Host's
// administrator's. Both sides of a clash are refused, so that no secret
// ever authenticates as one of two consumers by the order of files. The
// DevGuard socket authenticates by this judgement, and the consumer
// controller reports it.
func JudgeConsumers(consumers []*v1alpha1.Consumer, host *v1alpha1.Host) map[string]ConsumerVerdict {
	byID := map[string][]string{}
	byDigest := map[string][]string{}
	for _, c := range consumers {
		byID[c.ID()] = append(byID[c.ID()], c.Metadata.Name)
		byDigest[c.Spec.CredentialSHA256] = append(byDigest[c.Spec.CredentialSHA256], c.Metadata.Name)
	}
	admin := ""
	if host != nil && host.Spec.DevGuard != nil {
		admin = host.Spec.DevGuard.AdminCredentialSHA256
	}
	others := func(names []string, self string) string {
		return strings.Join(slices.DeleteFunc(slices.Sorted(slices.Values(names)), func(n string) bool { return n == self }), ", ")
	}
	out := make(map[string]ConsumerVerdict, len(consumers))
	for _, c := range consumers {
		name := c.Metadata.Name
		switch {
		case len(byID[c.ID()]) > 1:
			out[name] = ConsumerVerdict{Reason: ReasonConsumerIDConflict, Message: fmt.Sprintf(
				"consumer_id %s is also the id of Consumer %s: neither authenticates", c.ID(), others(byID[c.ID()], name))}
		case len(byDigest[c.Spec.CredentialSHA256]) > 1:
			out[name] = ConsumerVerdict{Reason: ReasonCredentialReused, Message: fmt.Sprintf(
				"credential_sha256 is also the credential of Consumer %s: neither authenticates", others(byDigest[c.Spec.CredentialSHA256], name))}
		case admin != "" && c.Spec.CredentialSHA256 == admin:
			out[name] = ConsumerVerdict{Reason: ReasonCredentialReused, Message: "credential_sha256 is also the Host's admin_credential_sha256: " +
				"the consumer does not authenticate, and the administrator's secret authenticates the administrator only"}
		default:
			out[name] = ConsumerVerdict{Usable: true, Message: fmt.Sprintf(
				"authenticates as consumer %s, generation %s, role %s", c.ID(), c.Spec.Generation, c.Spec.Role)}
		}
	}
	return out
}

// consumerReconciler keeps each Consumer's status: its consumer id on the
// wire, and Ready while it can authenticate (JudgeConsumers). Every
// Consumer is judged against all the others and the Host, so a change to
// any of them enqueues every Consumer.
type consumerReconciler struct {
	*env
}

var _ reconcile.Reconciler = (*consumerReconciler)(nil)

func (r *consumerReconciler) Reconcile(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj, ok := r.s.Desired.Get(req.Key)
	if !ok {
		r.s.Consumers.Delete(req.Key)
		return reconcile.Result{}, nil
	}
	c, ok := obj.(*v1alpha1.Consumer)
	if !ok {
		return reconcile.Result{}, reconcile.TerminalError(fmt.Errorf("%s is a %T, not a Consumer", req.Key, obj))
	}
	consumers, host := DeclaredConsumers(r.s.Desired)
	v := JudgeConsumers(consumers, host)[c.Metadata.Name]
	ready := condition(v1alpha1.ConditionReady, v.Usable, ReasonConsumerReady, v.Reason, v.Message)
	decl, _ := r.s.Decls.Get(req.Key)
	now := r.now()
	updateStatus(r.s.Consumers, r.rec, req.Key, func(st *v1alpha1.ConsumerStatus) []v1alpha1.Condition {
		st.ConsumerID = c.ID()
		return setConditions(&st.Status, c.Metadata.Generation, now, append(declConditions(decl, st.Conditions), ready)...)
	})
	return reconcile.Result{}, nil
}

// DeclaredConsumers returns the declared Consumers, defaulted, and the
// declared Host, nil when none is.
func DeclaredConsumers(d *reconcile.DesiredStore) ([]*v1alpha1.Consumer, *v1alpha1.Host) {
	var consumers []*v1alpha1.Consumer
	for _, obj := range d.List(v1alpha1.KindConsumer) {
		if c, ok := obj.(*v1alpha1.Consumer); ok {
			consumers = append(consumers, c)
		}
	}
	var host *v1alpha1.Host
	for _, obj := range d.List(v1alpha1.KindHost) {
		if h, ok := obj.(*v1alpha1.Host); ok {
			host = h
		}
	}
	return consumers, host
}
