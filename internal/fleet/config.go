package fleet

import (
	"fmt"
	"os"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/marshal-dev/marshal/api/v1alpha1"
)

// RESTConfig returns the client configuration of kubeconfig, or, when it
// is empty, what kubectl would use: $KUBECONFIG, ~/.kube/config, else the
// service account of a pod.
func RESTConfig(kubeconfig string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	// As kubelet: one host's writes are few, but a burst after an outage
	// (its status, its lease, its events) must not wait on the default
	// of 5 per second.
	cfg.QPS, cfg.Burst = 20, 40
	cfg.UserAgent = "marshald"
	return cfg, nil
}

// DefaultHostName is the name this host goes by when --host-name is not
// given: the machine's host name, lowercase, without its domain.
func DefaultHostName() (string, error) {
	h, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("host name: %w", err)
	}
	name, _, _ := strings.Cut(strings.ToLower(h), ".")
	if err := CheckHostName(name); err != nil {
		return "", fmt.Errorf("%w; pass --host-name", err)
	}
	return name, nil
}

// CheckHostName reports a host name that cannot name a Host object.
func CheckHostName(name string) error {
	if msgs := v1alpha1.ValidateName(name); len(msgs) > 0 {
		return fmt.Errorf("%w %q: %s", ErrHostName, name, strings.Join(msgs, "; "))
	}
	return nil
}
