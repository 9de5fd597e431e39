package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/clock"

	"github.com/marshal-dev/marshal/api/v1alpha1"
)

// FieldManager is who marshald's writes are applied as, per host, so
// that each host owns only the fields it writes.
func FieldManager(host string) string { return "marshald/" + host }

var hostsResource = schema.GroupVersionResource{Group: v1alpha1.Group, Version: v1alpha1.Version, Resource: "hosts"}

// HostStatusOptions configure a HostStatus.
type HostStatusOptions struct {
	// Client reaches the API server. Required.
	Client dynamic.Interface
	// HostName names this host's Host object. Required.
	HostName string
	// Status returns the status to report, read afresh for each write.
	// Required.
	Status func() v1alpha1.HostStatus
	// Register creates the Host, with an empty spec, when the API holds
	// none of this host's name, as kubelet --register-node does its
	// Node; otherwise the status waits until one is declared.
	Register bool
	// Interval is the least time between two writes. Default 10s.
	Interval time.Duration
	// Clock drives the interval. Default: the real clock.
	Clock clock.WithTicker
	// Logger logs. Optional.
	Logger *slog.Logger
}

// HostStatus writes the status of this host's Host object when it
// changes: Changed says it may have, and the write that follows applies
// it whole, unless it is what was written last. Writes are spaced by
// Interval; a failed one is tried again after it. With Register, a Host
// that is not there is created first, whenever a write finds none.
type HostStatus struct {
	opts HostStatusOptions
	log  *slog.Logger
	wake chan struct{}
}

// NewHostStatus returns a HostStatus; Start runs it.
func NewHostStatus(opts HostStatusOptions) *HostStatus {
	if opts.Interval <= 0 {
		opts.Interval = 10 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &HostStatus{opts: opts, log: log.With("component", "host-status"), wake: make(chan struct{}, 1)}
	h.Changed()
	return h
}

// Changed says the status may have changed. It never blocks.
func (h *HostStatus) Changed() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// Start writes the status as it changes until ctx ends.
func (h *HostStatus) Start(ctx context.Context) error {
	var (
		last      []byte // what the API holds, as written last
		lastWrite time.Time
		missing   bool // the last write found no Host
		retry     <-chan time.Time
	)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-h.wake:
		case <-retry:
		}
		retry = nil
		if wait := h.opts.Interval - h.opts.Clock.Since(lastWrite); !lastWrite.IsZero() && wait > 0 {
			t := h.opts.Clock.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C():
			}
		}
		body, err := json.Marshal(h.opts.Status())
		if err != nil {
			return err
		}
		if bytes.Equal(body, last) {
			continue
		}
		lastWrite = h.opts.Clock.Now()
		err = h.write(ctx, body)
		if apierrors.IsNotFound(err) && h.opts.Register {
			err = h.register(ctx, body)
		}
		switch {
		case err == nil:
			last, missing = body, false
		case ctx.Err() != nil:
			return nil
		case apierrors.IsNotFound(err) || errors.Is(err, ErrNoHost):
			// Written when the Host appears: its declaration changes the
			// status.
			if !missing {
				h.log.Warn("no Host object is named after this host: its status is not reported until one is", "host", h.opts.HostName, "err", err)
			}
			last, missing = nil, true
		default:
			h.log.Warn("writing the Host's status", "host", h.opts.HostName, "err", err)
			last = nil
			retry = h.opts.Clock.After(h.opts.Interval)
		}
	}
}

// register creates this host's Host with an empty spec, its capacity
// measured, and writes status to it. One created meanwhile, by the fleet
// or another run, is left as it is. A creation the API refuses (no CRD,
// no right to) is ErrNoHost.
func (h *HostStatus) register(ctx context.Context, status []byte) error {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.APIVersion, "kind": v1alpha1.KindHost,
		"metadata": map[string]any{"name": h.opts.HostName},
		"spec":     map[string]any{},
	}}
	_, err := h.opts.Client.Resource(hostsResource).Create(ctx, obj, metav1.CreateOptions{FieldManager: FieldManager(h.opts.HostName)})
	switch {
	case err == nil:
		h.log.Info("registered this host's Host object, its capacity measured", "host", h.opts.HostName)
	case apierrors.IsAlreadyExists(err):
	case apierrors.IsForbidden(err) || apierrors.IsNotFound(err):
		return fmt.Errorf("%w, and creating it was refused: %w", ErrNoHost, err)
	default:
		return err
	}
	return h.write(ctx, status)
}

// write applies status to the Host, as this host's field manager: the
// fields it wrote before and leaves out now are removed.
func (h *HostStatus) write(ctx context.Context, status []byte) error {
	var st map[string]any
	if err := json.Unmarshal(status, &st); err != nil {
		return err
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.APIVersion, "kind": v1alpha1.KindHost,
		"metadata": map[string]any{"name": h.opts.HostName},
		"status":   st,
	}}
	_, err := h.opts.Client.Resource(hostsResource).ApplyStatus(ctx, h.opts.HostName, obj,
		metav1.ApplyOptions{FieldManager: FieldManager(h.opts.HostName), Force: true})
	return err
}
