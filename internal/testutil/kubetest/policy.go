package kubetest

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// What dist/kubernetes's admission policy is about: hosts, named
// marshal:host:<host> in group marshal:hosts, and their Leases.
const (
	hostsGroup     = "marshal:hosts"
	hostUserPrefix = "marshal:host:"
	leaseNamespace = "marshal-system"
)

// hostRestrictionInForce waits until dist/kubernetes's admission policy
// refuses a host the Lease of another. The API server loads a policy a
// while after it is created and says so in no other way, so a dry run is
// tried until the policy refuses it.
func (s *Server) hostRestrictionInForce(ctx context.Context) error {
	client, err := s.UserClient(hostUserPrefix+"kubetest-probe", hostsGroup)
	if err != nil {
		return err
	}
	leases := client.Resource(schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}).Namespace(leaseNamespace)
	lease := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
		"metadata": map[string]any{"name": "kubetest-another", "namespace": leaseNamespace},
	}}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for {
		_, err := leases.Create(ctx, lease, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the admission policy of dist/kubernetes is not in force after %v; the last probe: %v", startTimeout, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
