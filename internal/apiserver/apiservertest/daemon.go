package apiservertest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/apiserver"
	"github.com/marshal-dev/marshal/internal/applier"
	"github.com/marshal-dev/marshal/internal/launch"
	"github.com/marshal-dev/marshal/internal/localapi"
	"github.com/marshal-dev/marshal/reconcile"
)

// Daemon is an in-memory apiserver.Daemon. Its zero value is not usable;
// call NewDaemon. Its methods may be called from any goroutine.
type Daemon struct {
	// mu guards the fields that follow.
	mu      sync.Mutex
	info    localapi.Info
	doctor  localapi.Doctor
	objects map[string]map[string]any       // kind → name → object
	changed map[string]*apiserver.ChangeLog // kind → its changes
	unnamed map[string]bool
	events  []v1alpha1.Event
	seq     uint64
	evMore  chan struct{} // closed at the next event
	dir     string
	held    bool
	applied []localapi.ApplyRequest
	run     RunFunc
	explain ExplainFunc
	backup  []byte
	egress  [][]byte
	egMore  chan struct{} // closed at the next egress record
	noProxy bool
	// lagging is set while reloads after Apply and Delete wait for
	// CatchUp, as a manifest source lags the files it watches.
	lagging  bool
	stops    []localapi.StopRequest
	stopMore chan struct{} // closed at the next stop
	// beforeWatch runs once, when a watch first asks what changed.
	beforeWatch func()
}

// RunFunc answers a run in place of the launch path: a plan, or an error
// (a *launch.Refusal for a refusal). caller is closed after it returns.
type RunFunc func(ctx context.Context, req launch.Request, caller *launch.Process) (launch.Plan, error)

// ExplainFunc answers an explained run in place of the launch path.
type ExplainFunc func(ctx context.Context, req launch.Request) (launch.Explanation, error)

var _ apiserver.Daemon = (*Daemon)(nil)

// NewDaemon returns a daemon with no objects and no events.
func NewDaemon() *Daemon {
	return &Daemon{
		objects:  map[string]map[string]any{},
		changed:  map[string]*apiserver.ChangeLog{},
		unnamed:  map[string]bool{},
		evMore:   make(chan struct{}),
		egMore:   make(chan struct{}),
		stopMore: make(chan struct{}),
	}
}

// AddEgress appends rec to the egress audit log and wakes its followers.
func (d *Daemon) AddEgress(rec localapi.EgressRecord) {
	line, err := json.Marshal(rec)
	if err != nil {
		panic(err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.egress = append(d.egress, line)
	close(d.egMore)
	d.egMore = make(chan struct{})
}

// NoEgressProxy makes EgressLog answer that the proxy does not run.
func (d *Daemon) NoEgressProxy() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.noProxy = true
}

// SetInfo sets what Info answers.
func (d *Daemon) SetInfo(info localapi.Info) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.info = info
}

// SetDoctor sets what Doctor answers.
func (d *Daemon) SetDoctor(doc localapi.Doctor) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.doctor = doc
}

// Set adds or replaces obj (a *v1alpha1.Profile, Workspace, Host or
// Agent), by its kind and metadata.name.
func (d *Daemon) Set(obj any) {
	kind, name := identify(obj)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.objects[kind] == nil {
		d.objects[kind] = map[string]any{}
	}
	d.objects[kind][name] = obj
	d.changeLogLocked(kind).Note(name)
}

// Remove removes an object.
func (d *Daemon) Remove(kind, name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.objects[kind], name)
	d.changeLogLocked(kind).Note(name)
}

// Record adds an event, giving it the next Seq, and returns that Seq.
func (d *Daemon) Record(ev v1alpha1.Event) uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seq++
	ev.Seq = d.seq
	// A repeat replaces the event it repeats, as the recorder does.
	d.events = slices.DeleteFunc(d.events, func(e v1alpha1.Event) bool {
		return e.Object == ev.Object && e.Reason == ev.Reason && e.Type == ev.Type && e.Message == ev.Message
	})
	d.events = append(d.events, ev)
	close(d.evMore)
	d.evMore = make(chan struct{})
	return ev.Seq
}

// UseConfigDir makes Apply and Delete run package applier on dir, and
// replaces the declared objects (Profiles, Workspaces, Hosts) with what
// dir declares after each one, as if reconciled at once.
func (d *Daemon) UseConfigDir(dir string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dir = dir
}

// Hold marks the config dir as held, for ConfirmEmpty to release.
func (d *Daemon) Hold() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.held = true
	d.info.Source.Held = true
}

// OnRun makes Run answer with fn. Without it, Run fails.
func (d *Daemon) OnRun(fn RunFunc) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.run = fn
}

// OnExplain makes Explain answer with fn. Without it, Explain fails.
func (d *Daemon) OnExplain(fn ExplainFunc) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.explain = fn
}

// SetBackup makes Backup answer data. Without it, Backup fails.
func (d *Daemon) SetBackup(data []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.backup = data
}

// Lag makes Apply and Delete leave the objects as they are until CatchUp,
// as marshald's manifest source sees a changed file a moment later.
func (d *Daemon) Lag() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lagging = true
}

// CatchUp ends Lag and reloads the config dir.
func (d *Daemon) CatchUp(ctx context.Context) error {
	d.mu.Lock()
	d.lagging = false
	dir := d.dir
	d.mu.Unlock()
	return d.reload(ctx, dir)
}

// Applied returns the apply requests received, in order.
func (d *Daemon) Applied() []localapi.ApplyRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.applied)
}

// Info answers what SetInfo set.
func (d *Daemon) Info(ctx context.Context) localapi.Info {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.info
}

// Doctor answers what SetDoctor set.
func (d *Daemon) Doctor(ctx context.Context) localapi.Doctor {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.doctor
}

// List returns the objects of kind sorted by name.
func (d *Daemon) List(ctx context.Context, kind string) ([]any, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	names := make([]string, 0, len(d.objects[kind]))
	for name := range d.objects[kind] {
		names = append(names, name)
	}
	slices.Sort(names)
	items := make([]any, len(names))
	for i, name := range names {
		items[i] = d.objects[kind][name]
	}
	return items, nil
}

// BeforeWatch makes fn run once, when the next watch starts, before it
// takes its state: to change the objects between what a client listed
// and what its watch starts from.
func (d *Daemon) BeforeWatch(fn func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.beforeWatch = fn
}

// Changed answers from the changes Set and Remove made to kind; never
// known for a kind named to Unnamed.
func (d *Daemon) Changed(kind string, after uint64) ([]string, uint64, <-chan struct{}, bool) {
	d.mu.Lock()
	before := d.beforeWatch
	if after == 0 {
		d.beforeWatch = nil
	}
	d.mu.Unlock()
	if after == 0 && before != nil {
		before()
	}
	d.mu.Lock()
	l, unnamed := d.changeLogLocked(kind), d.unnamed[kind]
	d.mu.Unlock()
	names, last, next, known := l.Since(after)
	return names, last, next, known && !unnamed
}

// Unnamed makes Changed not name the objects of kind that change, as
// marshald does for the Host and Agents: a watch lists kind again.
func (d *Daemon) Unnamed(kind string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.unnamed[kind] = true
}

func (d *Daemon) changeLogLocked(kind string) *apiserver.ChangeLog {
	l, ok := d.changed[kind]
	if !ok {
		l = apiserver.NewChangeLog()
		d.changed[kind] = l
	}
	return l
}

// Get returns one object or an error wrapping apiserver.ErrNotFound.
func (d *Daemon) Get(ctx context.Context, kind, name string) (any, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	obj, ok := d.objects[kind][name]
	if !ok {
		return nil, fmt.Errorf("%s %q: %w", kind, name, apiserver.ErrNotFound)
	}
	return obj, nil
}

// EgressLog reads the records AddEgress added that q selects, then
// follows.
func (d *Daemon) EgressLog(ctx context.Context, q apiserver.EgressQuery, fn func([]byte) error, caughtUp func() error) error {
	d.mu.Lock()
	if d.noProxy {
		d.mu.Unlock()
		return fmt.Errorf("the egress proxy does not run: %w", apiserver.ErrNotSupported)
	}
	d.mu.Unlock()
	return q.Select(ctx, d.readEgress, fn, caughtUp)
}

// readEgress reads every record AddEgress added, then follows.
func (d *Daemon) readEgress(ctx context.Context, follow bool, fn func([]byte) error, caughtUp func() error) error {
	next := 0
	for first := true; ; first = false {
		d.mu.Lock()
		lines, more := d.egress[next:], d.egMore
		next = len(d.egress)
		d.mu.Unlock()
		for _, line := range lines {
			if err := fn(line); err != nil {
				return err
			}
		}
		if first {
			if err := caughtUp(); err != nil {
				return err
			}
		}
		if !follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-more:
		}
	}
}

// Events returns the events after seq after, about obj unless it is zero.
func (d *Daemon) Events(obj reconcile.Key, after uint64) ([]v1alpha1.Event, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []v1alpha1.Event
	for _, e := range d.events {
		if e.Seq <= after {
			continue
		}
		if obj != (reconcile.Key{}) && (e.Object.Kind != obj.Kind || e.Object.Name != obj.Name) {
			continue
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b v1alpha1.Event) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, d.evMore
}

// Apply runs applier.Apply on the config dir, then reloads it.
func (d *Daemon) Apply(ctx context.Context, req localapi.ApplyRequest) (localapi.ApplyResult, error) {
	d.mu.Lock()
	d.applied = append(d.applied, req)
	dir := d.dir
	d.mu.Unlock()
	if dir == "" {
		return localapi.ApplyResult{}, fmt.Errorf("apply: no config dir: %w", apiserver.ErrNotSupported)
	}
	decl, err := applier.Scan(ctx, dir)
	if err != nil {
		return localapi.ApplyResult{}, err
	}
	res, err := applier.Apply(ctx, dir, decl, req)
	if err != nil {
		return res, err
	}
	if req.AllowEmpty {
		res.Confirmed, _ = d.ConfirmEmpty(ctx)
	}
	return res, d.reload(ctx, dir)
}

// Delete runs applier.Delete on the config dir, then reloads it.
func (d *Daemon) Delete(ctx context.Context, req localapi.DeleteRequest) (localapi.DeleteResult, error) {
	d.mu.Lock()
	dir := d.dir
	d.mu.Unlock()
	if dir == "" {
		return localapi.DeleteResult{}, fmt.Errorf("delete: no config dir: %w", apiserver.ErrNotSupported)
	}
	decl, err := applier.Scan(ctx, dir)
	if err != nil {
		return localapi.DeleteResult{}, err
	}
	res, err := applier.Delete(ctx, dir, decl, req)
	if err != nil {
		return res, err
	}
	return res, d.reload(ctx, dir)
}

// ConfirmEmpty releases a hold set with Hold.
func (d *Daemon) ConfirmEmpty(ctx context.Context) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	released := d.held
	d.held = false
	d.info.Source.Held = false
	return released, nil
}

// Run answers with what OnRun set, then closes caller.
func (d *Daemon) Run(ctx context.Context, req launch.Request, caller *launch.Process) (launch.Plan, error) {
	defer caller.Close()
	d.mu.Lock()
	fn := d.run
	d.mu.Unlock()
	if fn == nil {
		return launch.Plan{}, errors.New("apiservertest: no OnRun")
	}
	return fn(ctx, req, caller)
}

// Explain answers with what OnExplain set.
func (d *Daemon) Explain(ctx context.Context, req launch.Request) (launch.Explanation, error) {
	d.mu.Lock()
	fn := d.explain
	d.mu.Unlock()
	if fn == nil {
		return launch.Explanation{}, errors.New("apiservertest: no OnExplain")
	}
	return fn(ctx, req)
}

// StopsChanged returns a channel closed at the next stop asked for.
func (d *Daemon) StopsChanged() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stopMore
}

// Stopped returns the stops asked for, in order.
func (d *Daemon) Stopped() []localapi.StopRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.stops)
}

// StopAgent records the stop and removes the agent, as its end would.
func (d *Daemon) StopAgent(ctx context.Context, name string, grace time.Duration) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.objects[v1alpha1.KindAgent][name]; !ok {
		return fmt.Errorf("agent %q: %w", name, apiserver.ErrNotFound)
	}
	d.stops = append(d.stops, localapi.StopRequest{Agent: name, GraceMS: grace.Milliseconds()})
	close(d.stopMore)
	d.stopMore = make(chan struct{})
	if !d.lagging {
		delete(d.objects[v1alpha1.KindAgent], name)
		d.changeLogLocked(v1alpha1.KindAgent).Note(name)
	}
	return nil
}

// Backup answers what SetBackup set, in a file no path names.
func (d *Daemon) Backup(ctx context.Context) (*os.File, error) {
	d.mu.Lock()
	data := d.backup
	d.mu.Unlock()
	if data == nil {
		return nil, errors.New("apiservertest: no SetBackup")
	}
	f, err := os.CreateTemp("", "apiservertest-backup")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(0, 0); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// reload replaces the declared objects with what dir declares, unless
// the daemon lags.
func (d *Daemon) reload(ctx context.Context, dir string) error {
	d.mu.Lock()
	lagging := d.lagging
	d.mu.Unlock()
	if lagging {
		return nil
	}
	decl, err := applier.Scan(ctx, dir)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, kind := range v1alpha1.Kinds {
		next := map[string]any{}
		for _, k := range decl.Keys(kind) {
			_, obj, _ := decl.Lookup(k)
			next[k.Name] = obj
		}
		log := d.changeLogLocked(kind)
		for name := range d.objects[kind] {
			if _, kept := next[name]; !kept {
				log.Note(name)
			}
		}
		for name := range next {
			log.Note(name)
		}
		d.objects[kind] = next
	}
	return nil
}

// identify returns obj's kind and name, read from its JSON.
func identify(obj any) (kind, name string) {
	data, err := json.Marshal(obj)
	if err != nil {
		panic(fmt.Sprintf("apiservertest: encoding %T: %v", obj, err))
	}
	var v struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(data, &v); err != nil || v.Kind == "" || v.Metadata.Name == "" {
		panic(fmt.Sprintf("apiservertest: %T has no kind or name", obj))
	}
	return v.Kind, v.Metadata.Name
}

// Serve runs a server of d on a fresh unix socket until t ends, and
// returns the socket's path. The socket's directory is short-named, so
// the path fits the kernel's limit whatever the test's name.
func Serve(t testing.TB, d apiserver.Daemon, opts apiserver.Options) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "mapi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "marshal.sock")
	ln, err := apiserver.Listen(socket)
	if err != nil {
		t.Fatal(err)
	}
	ServeOn(t, apiserver.New(d, opts), ln)
	return socket
}

// ServeOn runs s on ln until t ends (Serve's context is t.Context()),
// then waits for Serve and checks that it returned nil.
func ServeOn(t testing.TB, s *apiserver.Server, ln net.Listener) {
	t.Helper()
	ctx := t.Context()
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		if err := <-done; err != nil {
			t.Errorf("Serve returned %v, want nil", err)
		}
	})
}
