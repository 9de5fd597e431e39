package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/controllers"
	"github.com/marshal-dev/marshal/internal/admission"
	"github.com/marshal-dev/marshal/internal/admission/pressure"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/metrics"
	"github.com/marshal-dev/marshal/reconcile"
)

// createJournal creates the admission journal when it is missing. New
// calls it on the first start of a state dir before anything else is
// written there, so that a first start that fails later (no cgroup
// backend, the socket taken) leaves the journal beside the state file,
// and the next start does not take it for a journal that was lost.
func (d *Daemon) createJournal() error {
	path := d.cfg.journalFile()
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := admission.Create(path); err != nil {
		return fmt.Errorf("creating admission journal: %w", err)
	}
	d.log.Info("created the admission journal", "path", path)
	return nil
}

// openAuthority opens the admission journal, which the first start of
// the state dir created: a missing journal was lost, and starting a new
// one silently would forget reservations, unless asked (--init-journal).
func (d *Daemon) openAuthority() (err error) {
	path := d.cfg.journalFile()
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		if !d.cfg.InitJournal {
			return fmt.Errorf("admission journal %s is missing, but state dir %s was used before: "+
				"if the journal was lost, start marshald once with --init-journal to begin a new one "+
				"(reservations it held are forgotten): %w", path, d.cfg.StateDir, admission.ErrJournalMissing)
		}
		if err := d.createJournal(); err != nil {
			return err
		}
	}
	if d.pressure, err = d.newPressure(); err != nil {
		return err
	}
	d.closers = append(d.closers, d.pressure.Close)
	// A consumer's attempt names its Profile itself: it must be declared.
	declared := func(name string) bool {
		_, ok := d.stores.Desired.Get(controllers.ProfileKey(name))
		return ok
	}
	d.auth, err = admission.Open(path, admission.Options{Pressure: d.pressure, Profiles: declared})
	if err != nil {
		return fmt.Errorf("admission journal: %w", err)
	}
	d.closers = append(d.closers, d.auth.Close)
	if err := d.auth.LogError(); err != nil {
		d.log.Warn("the admission journal has no write-ahead log: every commit waits for the journal's own", "err", err)
	}
	return nil
}

// pressureMonitor keeps admission's pressure level current while it runs.
type pressureMonitor interface {
	admission.PressureSource
	Run(ctx context.Context) error
	Close() error
}

// newPressure returns the pressure source cfg.Pressure names.
func (d *Daemon) newPressure() (pressureMonitor, error) {
	switch {
	case d.cfg.Pressure == PressureOff:
		return notMonitored{}, nil
	case d.cfg.pressureSampler != nil:
		return pressure.NewMonitor(pressure.MonitorConfig{Sampler: d.cfg.pressureSampler, OnLevel: d.levels.add}), nil
	}
	mounts, err := cgroup.ReadMounts()
	if err != nil {
		return nil, err
	}
	return pressure.NewHostMonitor(d.cfg.StateDir, mounts.V2, d.levels.add), nil
}

// notMonitored is --pressure=off: always normal, nothing to run.
type notMonitored struct{}

func (notMonitored) Status(now time.Time) pressure.Status { return pressure.NotMonitored.Status(now) }
func (notMonitored) Close() error                         { return nil }
func (notMonitored) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// levelChange is one change of the pressure level.
type levelChange struct{ from, to pressure.Status }

// levelChanges queues the pressure monitor's changes of level for
// recordPressure: the monitor must not block on the event recorder, and
// its first changes come before the config dir says which Host they
// belong to.
type levelChanges struct {
	// mu guards pending.
	mu      sync.Mutex
	pending []levelChange
	// wake holds at most one wake-up for recordPressure.
	wake chan struct{}
}

func newLevelChanges() *levelChanges { return &levelChanges{wake: make(chan struct{}, 1)} }

// add queues a change; it is the monitor's OnLevel.
func (l *levelChanges) add(from, to pressure.Status) {
	l.mu.Lock()
	l.pending = append(l.pending, levelChange{from, to})
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *levelChanges) take() []levelChange {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.pending
	l.pending = nil
	return p
}

// recordPressure records an event on the Host for each change of the
// pressure level, once the config dir is declared, until ctx ends. The
// first sample opening admission whole, which every start has, records
// nothing.
func (d *Daemon) recordPressure(ctx context.Context) {
	select {
	case <-d.source.Synced():
	case <-ctx.Done():
		return
	}
	for {
		for _, c := range d.levels.take() {
			d.recordLevel(c.from, c.to)
		}
		select {
		case <-ctx.Done():
			return
		case <-d.levels.wake:
		}
	}
}

func (d *Daemon) recordLevel(from, to pressure.Status) {
	key := controllers.HostKey(controllers.LocalHost)
	if hosts := d.stores.Desired.List(v1alpha1.KindHost); len(hosts) > 0 {
		key = controllers.HostKey(hosts[0].GetObjectMeta().Name)
	}
	switch to.Level {
	case pressure.Normal:
		if from.Reason != pressure.ReasonNotSampled {
			d.recorder.Normal(key, ReasonPressureNormal, "pressure cleared: the admission target is the whole work capacity")
		}
	case pressure.Constrained:
		d.recorder.Warning(key, ReasonPressureConstrained, to.Cause()+": the admission target is half the work capacity")
	default:
		d.recorder.Warning(key, ReasonPressureCritical, to.Cause()+": the admission target is zero, nothing new is admitted")
	}
	d.view.changed[v1alpha1.KindHost].Note(key.Name)
}

// Reasons of the Host's pressure events.
const (
	ReasonPressureNormal      = "PressureNormal"
	ReasonPressureConstrained = "PressureConstrained"
	ReasonPressureCritical    = "PressureCritical"
)

// wireAuthority keeps the authority's inputs equal to the declared Host
// and to what the host controller probed.
func (d *Daemon) wireAuthority() {
	s := d.stores
	s.Desired.OnChange(reconcile.ForKind(v1alpha1.KindHost, func(reconcile.Key) { d.setHost() }))
	s.Hosts.OnChange(func(k reconcile.Key) { d.setPlan(k) })
	d.setHost()
}

// setHost gives the authority the declared Host's capacity and
// prepared_ttl, or the defaults when no Host is declared.
func (d *Daemon) setHost() {
	var capacity *v1alpha1.Capacity
	var ttl time.Duration
	if hosts := d.stores.Desired.List(v1alpha1.KindHost); len(hosts) > 0 {
		h := hosts[0].(*v1alpha1.Host)
		capacity = h.Spec.Capacity
		if h.Spec.PreparedTTL != nil {
			ttl = h.Spec.PreparedTTL.Duration
		}
	}
	if err := d.auth.SetHost(capacity, ttl); err != nil {
		d.log.Error("setting the admission authority's capacity", "err", err)
	}
}

// setPlan gives the authority what the host controller's probe found.
func (d *Daemon) setPlan(k reconcile.Key) {
	st, ok := d.stores.Hosts.Get(k)
	if !ok || len(st.Enforcement) == 0 {
		return
	}
	caps := cgroup.Capabilities{}
	for _, e := range st.Enforcement {
		caps[cgroup.Resource(e.Resource)] = cgroup.Enforcement{Level: e.Level, Method: cgroup.Method(e.Method), Controller: e.Controller, Reason: e.Reason}
	}
	if err := d.auth.SetPlan(caps); err != nil {
		d.log.Error("setting the admission plan", "err", err)
	}
}

// admissionStatus is the authority's view for `describe host`.
func (d *Daemon) admissionStatus() *v1alpha1.AdmissionStatus {
	s := d.auth.Snapshot()
	st := &v1alpha1.AdmissionStatus{
		Capacity:        s.Capacity.Amounts(),
		Reserved:        s.Reserved.Amounts(),
		Target:          s.Target.Amounts(),
		Committed:       s.Committed.Amounts(),
		Free:            s.Free.Amounts(),
		Pressure:        string(s.Pressure.Level),
		PressureReason:  string(s.Pressure.Reason),
		PressureMessage: s.Pressure.Cause(),
		PressureSince:   s.Pressure.Since,
		Charged:         int64(s.Charged),
		Ready:           s.Ready,
		NotReady:        string(s.NotReady),
		NotReadySince:   s.JournalFailedAt,
	}
	return st
}

// newMetrics builds the metrics over the daemon's parts.
func (d *Daemon) newMetrics(queues *metrics.Workqueue) error {
	var ctrls []metrics.Controller
	for _, c := range d.manager.Controllers() {
		ctrls = append(ctrls, c)
	}
	var err error
	d.metrics, err = metrics.New(metrics.Options{
		Controllers: ctrls,
		Workqueue:   queues,
		Agents:      d.stores.Agents,
		Declared:    d.stores.Desired,
		Config: metrics.ConfigSourceFunc(func() metrics.ConfigState {
			st := d.source.Status()
			return metrics.ConfigState{Files: st.Files, Errors: len(st.Errors), Held: st.Held}
		}),
		Admission: metrics.AdmissionSourceFunc(func() metrics.AdmissionState {
			s := d.auth.Snapshot()
			return metrics.AdmissionState{
				Ready: s.Ready, Capacity: metrics.Amounts(s.Capacity), Target: metrics.Amounts(s.Target),
				Committed: metrics.Amounts(s.Committed), Free: metrics.Amounts(s.Free), Charged: s.Charged,
			}
		}),
		Logger: d.log,
	})
	return err
}

// Backup writes a copy of the admission journal into a file beside it,
// which it unlinks at once: the server learns the copy's length, and
// nothing is left behind whatever becomes of the request.
func (v *view) Backup(ctx context.Context) (*os.File, error) {
	f, err := os.CreateTemp(v.d.cfg.StateDir, ".backup-*")
	if err != nil {
		return nil, fmt.Errorf("backing up the admission journal: %w", err)
	}
	os.Remove(f.Name())
	_, err = v.d.auth.Backup(ctx, f)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("backing up the admission journal: %w", err)
	}
	return f, nil
}

// followAdmission tells watchers of the Host that the authority's view
// changed, at every commit and when its journal fails or recovers, and
// logs those, until ctx ends.
func (d *Daemon) followAdmission(ctx context.Context) {
	var failing admission.NotReady
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.auth.Changed():
			d.view.changed[v1alpha1.KindHost].Note(controllers.LocalHost) // the Host is always listed again
		}
		s := d.auth.Snapshot()
		switch {
		case journalReason(s.NotReady) && s.NotReady != failing:
			d.log.Error("admission refused: the journal cannot commit; the next request tries again",
				"reason", s.NotReady, "journal", d.cfg.journalFile(), "err", d.auth.JournalError())
			failing = s.NotReady
		case !journalReason(s.NotReady) && failing != "":
			d.log.Info("admission journal commits again", "journal", d.cfg.journalFile())
			failing = ""
		}
	}
}

func journalReason(r admission.NotReady) bool {
	switch r {
	case admission.NotReadyJournalFull, admission.NotReadyJournalFailed, admission.NotReadyJournalUnknown:
		return true
	}
	return false
}
