package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/clock"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/reconcile"
)

var eventsResource = schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"}

// ReportingController is the controller that events from marshald name.
const ReportingController = "marshal.dev/marshald"

// EventNamespace is where events about marshal's objects go: they are
// cluster-scoped, and the API takes events about such objects only in
// "default" (as it does a Node's).
const EventNamespace = metav1.NamespaceDefault

// maxNote is the longest note the API takes, in bytes.
const maxNote = 1024

// EventLog is where the events recorded on the host are read from.
// *events.Recorder is one.
type EventLog interface {
	// List returns the events with Seq above after, oldest first, and a
	// channel closed when another is recorded.
	List(obj reconcile.Key, after uint64) ([]v1alpha1.Event, <-chan struct{})
}

// EventsOptions configure Events.
type EventsOptions struct {
	// Client reaches the API server. Required.
	Client dynamic.Interface
	// HostName is the reporting instance. Required.
	HostName string
	// Log is where the events are read. Required.
	Log EventLog
	// UID returns the uid of an object listed from the API. Required.
	UID func(reconcile.Key) (string, bool)
	// MaxAge drops an event that could not be written for this long.
	// Default 5m.
	MaxAge time.Duration
	// Clock drives the retries. Default: the real clock.
	Clock clock.WithTicker
	// Logger logs. Optional.
	Logger *slog.Logger
}

// Events writes the events recorded on this host from the moment it is
// made as events.k8s.io/v1 Events, about the object of the API they
// concern (an agent's, or one not from the API, about this host's Host),
// with this host as the reporting instance. A repeat the recorder counts
// updates the Event's series instead of writing another. Events are
// hints: one that cannot be written within MaxAge is dropped.
type Events struct {
	opts EventsOptions
	log  *slog.Logger
	// after is the Seq of the last event recorded before it was made:
	// those are not written.
	after uint64
	// written names the Event each repeated event went to; only Start's
	// goroutine uses it.
	written map[eventKey]string
}

type eventKey struct {
	typ             v1alpha1.EventType
	obj             reconcile.Key
	reason, message string
}

// NewEvents returns Events; Start runs it.
func NewEvents(opts EventsOptions) *Events {
	if opts.MaxAge <= 0 {
		opts.MaxAge = 5 * time.Minute
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Events{opts: opts, log: log.With("component", "kubernetes-events"), written: map[eventKey]string{}}
	if past, _ := opts.Log.List(reconcile.Key{}, 0); len(past) > 0 {
		e.after = past[len(past)-1].Seq
	}
	return e
}

// Start writes the events recorded since Events was made, and then as
// they are recorded, until ctx ends.
func (e *Events) Start(ctx context.Context) error {
	after := e.after
	for {
		evs, more := e.opts.Log.List(reconcile.Key{}, after)
		for _, ev := range evs {
			if !e.write(ctx, ev) {
				return nil
			}
			after = ev.Seq
		}
		select {
		case <-ctx.Done():
			return nil
		case <-more:
		}
	}
}

// write writes ev, trying again while it is younger than MaxAge. It
// returns false when ctx ended.
func (e *Events) write(ctx context.Context, ev v1alpha1.Event) bool {
	backoff := 500 * time.Millisecond
	for {
		err := e.writeOnce(ctx, ev)
		switch {
		case ctx.Err() != nil:
			return false
		case err == nil:
			return true
		case e.opts.Clock.Since(ev.LastSeen) > e.opts.MaxAge:
			e.log.Warn("dropping an event the API did not take", "reason", ev.Reason, "object", ev.Object.Kind+"/"+ev.Object.Name, "err", err)
			return true
		}
		t := e.opts.Clock.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C():
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

func (e *Events) writeOnce(ctx context.Context, ev v1alpha1.Event) error {
	key := eventKey{ev.Type, reconcile.Key{Kind: ev.Object.Kind, Name: ev.Object.Name}, ev.Reason, ev.Message}
	events := e.opts.Client.Resource(eventsResource).Namespace(EventNamespace)
	if name, ok := e.written[key]; ok && ev.Count > 1 {
		patch := fmt.Sprintf(`{"series":{"count":%d,"lastObservedTime":%q}}`, ev.Count, ev.LastSeen.UTC().Format(microTime))
		_, err := events.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		if err == nil {
			return nil
		}
		// Gone (events expire): written anew below.
		delete(e.written, key)
	}
	regarding, note := e.regarding(ev)
	obj := map[string]any{
		"apiVersion": "events.k8s.io/v1", "kind": "Event",
		"metadata": map[string]any{
			"name":      fmt.Sprintf("%s.%s.%x", regarding["name"], e.opts.HostName, ev.FirstSeen.UnixNano()),
			"namespace": EventNamespace,
		},
		"eventTime":           ev.FirstSeen.UTC().Format(microTime),
		"reportingController": ReportingController,
		"reportingInstance":   e.opts.HostName,
		"action":              ev.Reason,
		"reason":              ev.Reason,
		"type":                string(ev.Type),
		"note":                truncate(note, maxNote),
		"regarding":           regarding,
	}
	if ev.Count > 1 {
		obj["series"] = map[string]any{"count": ev.Count, "lastObservedTime": ev.LastSeen.UTC().Format(microTime)}
	}
	created, err := events.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	if len(e.written) >= 1000 {
		clear(e.written)
	}
	e.written[key] = created.GetName()
	return nil
}

// regarding is the object of the API ev is about, and its note: an
// object the API does not hold (an agent, the API itself) is reported on
// this host's Host, its note naming it.
func (e *Events) regarding(ev v1alpha1.Event) (map[string]any, string) {
	key := reconcile.Key{Kind: ev.Object.Kind, Name: ev.Object.Name}
	ref := func(k reconcile.Key, uid string) map[string]any {
		r := map[string]any{"apiVersion": v1alpha1.APIVersion, "kind": k.Kind, "name": k.Name}
		if uid != "" {
			r["uid"] = uid
		}
		return r
	}
	if uid, ok := e.opts.UID(key); ok {
		return ref(key, uid), ev.Message
	}
	host := reconcile.Key{Kind: v1alpha1.KindHost, Name: e.opts.HostName}
	uid, _ := e.opts.UID(host)
	return ref(host, uid), fmt.Sprintf("%s %s: %s", ev.Object.Kind, ev.Object.Name, ev.Message)
}

// truncate cuts s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
