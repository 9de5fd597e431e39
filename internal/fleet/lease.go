package fleet

import (
	"context"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/clock"
)

var leasesResource = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}

// microTime is the wire form of a Kubernetes MicroTime.
const microTime = "2006-01-02T15:04:05.000000Z07:00"

// HeartbeatOptions configure a Heartbeat.
type HeartbeatOptions struct {
	// Client reaches the API server. Required.
	Client dynamic.Interface
	// HostName names the Lease and holds it. Required.
	HostName string
	// Namespace is the Lease's namespace. Required.
	Namespace string
	// Duration is how long a renewal holds: a host whose Lease is older
	// is gone. It is renewed every quarter of it. Default 40s, as a
	// kubelet's.
	Duration time.Duration
	// Clock drives the renewals. Default: the real clock.
	Clock clock.WithTicker
	// Logger logs. Optional.
	Logger *slog.Logger
}

// Heartbeat keeps this host's Lease renewed: the host's liveness, as a
// node's Lease is, cheaper to renew than a status to write.
type Heartbeat struct {
	opts HeartbeatOptions
	log  *slog.Logger
}

// NewHeartbeat returns a Heartbeat; Start runs it.
func NewHeartbeat(opts HeartbeatOptions) *Heartbeat {
	if opts.Duration <= 0 {
		opts.Duration = 40 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Heartbeat{opts: opts, log: log.With("component", "heartbeat")}
}

// Start renews the Lease until ctx ends. A renewal that fails is tried
// again at the next tick.
func (h *Heartbeat) Start(ctx context.Context) error {
	acquired := h.opts.Clock.Now()
	t := h.opts.Clock.NewTicker(h.opts.Duration / 4)
	defer t.Stop()
	failing := false
	for {
		err := h.renew(ctx, acquired)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && !failing:
			h.log.Warn("renewing the host's Lease", "lease", h.opts.Namespace+"/"+h.opts.HostName, "err", err)
		case err == nil && failing:
			h.log.Info("renewing the host's Lease again", "lease", h.opts.Namespace+"/"+h.opts.HostName)
		}
		failing = err != nil
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

func (h *Heartbeat) renew(ctx context.Context, acquired time.Time) error {
	lease := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
		"metadata": map[string]any{"name": h.opts.HostName, "namespace": h.opts.Namespace},
		"spec": map[string]any{
			"holderIdentity":       h.opts.HostName,
			"leaseDurationSeconds": int64(h.opts.Duration / time.Second),
			"acquireTime":          acquired.UTC().Format(microTime),
			"renewTime":            h.opts.Clock.Now().UTC().Format(microTime),
		},
	}}
	_, err := h.opts.Client.Resource(leasesResource).Namespace(h.opts.Namespace).Apply(ctx, h.opts.HostName, lease,
		metav1.ApplyOptions{FieldManager: FieldManager(h.opts.HostName), Force: true})
	return err
}
