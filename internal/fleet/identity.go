package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/clock"
)

// A host's credential names it, as a kubelet's names its node
// (system:node:<node> in system:nodes): user HostUserPrefix+<host name>
// in the group HostsGroup. dist/kubernetes binds marshald's role to the
// group, and its admission policy lets each such user write only what
// is its own.
const (
	HostsGroup     = "marshal:hosts"
	HostUserPrefix = "marshal:host:"
)

// HostUser is the user name of host's credential.
func HostUser(host string) string { return HostUserPrefix + host }

var selfSubjectReviews = schema.GroupVersionResource{Group: "authentication.k8s.io", Version: "v1", Resource: "selfsubjectreviews"}

// Identity is who a credential authenticates as.
type Identity struct {
	User   string
	Groups []string
}

// ReviewSelf asks the API server who its client's credential
// authenticates as (a SelfSubjectReview, which every authenticated user
// may make).
func ReviewSelf(ctx context.Context, client dynamic.Interface) (Identity, error) {
	review := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview",
	}}
	got, err := client.Resource(selfSubjectReviews).Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return Identity{}, fmt.Errorf("asking the API who the credential is (SelfSubjectReview): %w", err)
	}
	user, _, _ := unstructured.NestedString(got.Object, "status", "userInfo", "username")
	groups, _, _ := unstructured.NestedStringSlice(got.Object, "status", "userInfo", "groups")
	return Identity{User: user, Groups: groups}, nil
}

// Check reports, as ErrIdentity, a credential that does not name host:
// marshald would write as another host, or as none, and the admission
// policy would refuse it.
func (id Identity) Check(host string) error {
	named, ok := strings.CutPrefix(id.User, HostUserPrefix)
	switch {
	case !ok:
		return fmt.Errorf("%w: it is user %q, which names no host: host %s's is user %q in group %s",
			ErrIdentity, id.User, host, HostUser(host), HostsGroup)
	case named != host:
		return fmt.Errorf("%w: it is user %q, which names host %q, not %q (--host-name): use host %s's credential, or --host-name %s",
			ErrIdentity, id.User, named, host, host, named)
	}
	return nil
}

// InHostsGroup reports whether the credential is in HostsGroup, which
// dist/kubernetes binds marshald's role to.
func (id Identity) InHostsGroup() bool { return slices.Contains(id.Groups, HostsGroup) }

// VerifyIdentity asks the API who the credential is and checks that it
// names host: ErrIdentity when it names another host or none, another
// error when the API did not say.
func VerifyIdentity(ctx context.Context, client dynamic.Interface, host string) (Identity, error) {
	id, err := ReviewSelf(ctx, client)
	if err != nil {
		return Identity{}, err
	}
	return id, id.Check(host)
}

// AwaitIdentity verifies the credential as VerifyIdentity does, trying
// again with a backoff of up to maxBackoff until the API says who it is.
// It returns nil once it names host, an ErrIdentity when it does not,
// and ctx's error when ctx ends first.
func AwaitIdentity(ctx context.Context, client dynamic.Interface, host string, clk clock.Clock, maxBackoff time.Duration, log *slog.Logger) (Identity, error) {
	backoff := min(500*time.Millisecond, maxBackoff)
	for logged := false; ; logged = true {
		id, err := VerifyIdentity(ctx, client, host)
		if err == nil || errors.Is(err, ErrIdentity) {
			return id, err
		}
		if !logged {
			log.Warn("the API cannot say who this host's credential is yet: nothing is written to it until it does", "err", err)
		}
		t := clk.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return Identity{}, ctx.Err()
		case <-t.C():
		}
		backoff = min(2*backoff, maxBackoff)
	}
}
