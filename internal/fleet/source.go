package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/intake"
	"github.com/marshal-dev/marshal/internal/state"
	"github.com/marshal-dev/marshal/reconcile"
)

// KindAPI is the kind of the keys that events about the API's lists are
// recorded against, one per resource ("KubernetesAPI/profiles").
const KindAPI = "KubernetesAPI"

// Options configure a Source.
type Options struct {
	// Client reaches the API server. Required.
	Client dynamic.Interface
	// Server names the API server in messages.
	Server string
	// HostName is this host's name: the Host of that name is its Host.
	// Required.
	HostName string
	// Selector picks the Profiles, Workspaces and Consumers this host
	// takes. Default: all of them.
	Selector labels.Selector
	// Sink receives the declarations. Required.
	Sink intake.Sink
	// Store persists last good objects, so that a restart while the API
	// cannot be reached declares them. Optional.
	Store intake.Store
	// Recorder records events. Optional.
	Recorder intake.Recorder
	// Logger logs. Optional.
	Logger *slog.Logger
	// MaxBackoff bounds the wait between two attempts to reach the API
	// after a failure. Default 10s.
	MaxBackoff time.Duration
}

// Source lists and watches the marshal.dev kinds of a Kubernetes API
// server and declares what this host takes of them.
type Source struct {
	opts   Options
	log    *slog.Logger
	lists  []*list
	synced chan struct{}
	// restored is how many objects an earlier run left; set before the
	// reflectors start.
	restored int

	// mu guards the fields below.
	mu        sync.Mutex
	isSynced  bool
	listed    int                      // lists that have come
	reachable bool                     // the last call to the API was answered
	failure   string                   // why the last one was not
	uids      map[reconcile.Key]string // of the objects listed
}

// New returns a Source; Start runs it.
func New(opts Options) *Source {
	if opts.Selector == nil {
		opts.Selector = labels.Everything()
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 10 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Source{opts: opts, log: log.With("component", "kubernetes"), synced: make(chan struct{}), uids: map[reconcile.Key]string{}}
	for _, k := range kindsWatched {
		prefix := unit(k.kind, "")
		origin := intake.Origin{
			Key:  reconcile.Key{Kind: KindAPI, Name: k.resource},
			Name: s.describe(k.kind, k.resource),
			// An object that never loaded is told on itself, as one
			// that stopped loading is by its Invalid condition.
			Unit: func(name string) (reconcile.Key, bool) {
				name, ok := strings.CutPrefix(name, prefix)
				return reconcile.Key{Kind: k.kind, Name: name}, ok
			},
		}
		s.lists = append(s.lists, &list{
			src: s, kind: k.kind, sums: map[string][32]byte{},
			gvr: schema.GroupVersionResource{Group: v1alpha1.Group, Version: v1alpha1.Version, Resource: k.resource},
			feed: intake.NewFeed(intake.FeedOptions{
				Origin: origin, Sink: opts.Sink, Store: opts.Store, Bucket: state.APILastGood,
				Prefix: prefix, Recorder: opts.Recorder, Logger: s.log,
			}),
		})
	}
	return s
}

// describe names the list of kind in messages.
func (s *Source) describe(kind, resource string) string {
	what := fmt.Sprintf("the %s.%s", resource, v1alpha1.Group)
	if kind == v1alpha1.KindHost {
		what = fmt.Sprintf("the Host %q", s.opts.HostName)
	} else if !s.opts.Selector.Empty() {
		what += " selected by " + s.opts.Selector.String()
	}
	if s.opts.Server != "" {
		what += " of " + s.opts.Server
	}
	return what
}

// Start declares the last good objects of an earlier run, then lists and
// watches every kind until ctx ends.
func (s *Source) Start(ctx context.Context) error {
	for _, l := range s.lists {
		n, err := l.restore()
		if err != nil {
			return err
		}
		s.restored += n
	}
	if s.restored > 0 {
		s.log.Info("declared the last good objects of the previous run until the API answers", "objects", s.restored)
	}
	// The writers stop after the reflectors, so that they write what the
	// reflectors left.
	writing, stopWriting := context.WithCancel(context.WithoutCancel(ctx))
	var writers, reflectors sync.WaitGroup
	for _, l := range s.lists {
		writers.Go(func() { l.feed.Run(writing) })
	}
	defer func() {
		stopWriting()
		writers.Wait()
	}()
	logger := logr.FromSlogHandler(s.log.Handler())
	for _, l := range s.lists {
		r := cache.NewReflectorWithOptions(s.listWatch(l), &unstructured.Unstructured{}, l, cache.ReflectorOptions{
			Name:            l.gvr.Resource,
			TypeDescription: l.gvr.Resource + "." + v1alpha1.Group,
			Logger:          &logger,
			Backoff: &wait.Backoff{
				Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.5,
				Steps: 1 << 30, Cap: s.opts.MaxBackoff,
			},
		})
		reflectors.Go(func() { r.RunWithContext(ctx) })
	}
	reflectors.Wait()
	return nil
}

// listWatch lists and watches what this host takes of l's kind, and
// notes whether the API answers.
func (s *Source) listWatch(l *list) cache.ListerWatcher {
	ri := s.opts.Client.Resource(l.gvr)
	pick := func(o *metav1.ListOptions) {
		if l.kind == v1alpha1.KindHost {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", s.opts.HostName).String()
		} else {
			o.LabelSelector = s.opts.Selector.String()
		}
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			pick(&o)
			obj, err := ri.List(ctx, o)
			s.answered(ctx, l, err)
			return obj, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			pick(&o)
			w, err := ri.Watch(ctx, o)
			s.answered(ctx, l, err)
			return w, err
		},
	}
}

// answered notes how a call about l went.
func (s *Source) answered(ctx context.Context, l *list, err error) {
	switch {
	case err == nil:
		s.reached()
	case ctx.Err() != nil:
	case apierrors.IsNotFound(err):
		// The API does not serve the kind: its CRD is not installed. It
		// declares nothing, and keeps nothing from being ready.
		if !l.listed.Swap(true) {
			s.log.Warn("the API does not serve this kind: install the CRDs of dist/kubernetes", "resource", l.gvr.Resource+"."+v1alpha1.Group)
			s.listedOne()
		}
	case apierrors.IsResourceExpired(err) || apierrors.IsGone(err) || errors.Is(err, io.EOF):
		// A watch to start again: the API answered.
	default:
		s.unreachable(err)
	}
}

// reached notes that the API answered.
func (s *Source) reached() {
	s.mu.Lock()
	was := s.reachable
	s.reachable, s.failure = true, ""
	s.mu.Unlock()
	if !was {
		s.record(false, "APIReachable", "the Kubernetes API answers; what it declares is taken again")
	}
}

// unreachable notes that a call to the API failed. If an earlier run left
// objects to reconcile from, they are declared and the host is ready.
func (s *Source) unreachable(err error) {
	s.mu.Lock()
	was := s.reachable || s.failure == ""
	s.reachable, s.failure = false, err.Error()
	s.mu.Unlock()
	if was {
		s.record(true, "APIUnreachable", fmt.Sprintf("the Kubernetes API cannot be reached (%v); reconciling from the last good objects, nothing is deleted", err))
	}
	if s.restored > 0 {
		s.markSynced()
	}
}

// listedOne notes that one more kind has come; the source is synced once
// every kind has.
func (s *Source) listedOne() {
	s.mu.Lock()
	s.listed++
	all := s.listed == len(s.lists)
	s.mu.Unlock()
	if all {
		s.markSynced()
	}
}

func (s *Source) markSynced() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.isSynced {
		s.isSynced = true
		close(s.synced)
	}
}

func (s *Source) record(warning bool, reason, message string) {
	key := reconcile.Key{Kind: KindAPI, Name: s.opts.Server}
	switch r := s.opts.Recorder; {
	case r == nil:
	case warning:
		r.Warning(key, reason, message)
	default:
		r.Normal(key, reason, message)
	}
}

func (s *Source) noteUID(key reconcile.Key, uid string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if uid == "" {
		delete(s.uids, key)
	} else {
		s.uids[key] = uid
	}
}

// UID returns the uid of the object of key in the API, when listed.
func (s *Source) UID(key reconcile.Key) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	uid, ok := s.uids[key]
	return uid, ok
}

// Synced is closed once every kind has been listed, or, when an earlier
// run left objects, once the API fails to answer: the host then
// reconciles from them.
func (s *Source) Synced() <-chan struct{} { return s.synced }

// ConfirmEmpty releases every hold: each emptied list is taken as meant.
// It reports whether a hold was released.
func (s *Source) ConfirmEmpty(ctx context.Context) (bool, error) {
	released := false
	for _, l := range s.lists {
		released = l.feed.ConfirmEmpty() || released
	}
	return released, ctx.Err()
}

// Status returns what the source sees now.
func (s *Source) Status() intake.Status {
	s.mu.Lock()
	st := intake.Status{Dir: s.opts.Server, Root: s.opts.Server}
	s.mu.Unlock()
	for _, l := range s.lists {
		fs := l.feed.Status()
		st.Files += fs.Units
		st.Objects += fs.Objects
		st.Errors = append(st.Errors, fs.Errors...)
		if fs.Held {
			st.Held = true
			st.HeldObjects += fs.Objects
		}
	}
	sort.SliceStable(st.Errors, func(i, j int) bool { return st.Errors[i].File < st.Errors[j].File })
	return st
}

// Reachable reports whether the last call to the API was answered, and
// why not.
func (s *Source) Reachable() (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reachable, s.failure
}
