package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	sddaemon "github.com/coreos/go-systemd/v22/daemon"
	"k8s.io/utils/clock"

	"github.com/marshal-dev/marshal/controllers"
	"github.com/marshal-dev/marshal/internal/admission"
	"github.com/marshal-dev/marshal/internal/agentstop"
	"github.com/marshal-dev/marshal/internal/apiserver"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/cgroup/detect"
	"github.com/marshal-dev/marshal/internal/devguardwire"
	"github.com/marshal-dev/marshal/internal/events"
	"github.com/marshal-dev/marshal/internal/intake"
	"github.com/marshal-dev/marshal/internal/launch"
	"github.com/marshal-dev/marshal/internal/localapi"
	"github.com/marshal-dev/marshal/internal/metrics"
	"github.com/marshal-dev/marshal/internal/source"
	"github.com/marshal-dev/marshal/internal/state"
	"github.com/marshal-dev/marshal/internal/version"
)

// eventWriteDelay is how long recorded events gather before they are
// written to the state database. Every launch records two, as it starts
// and as it ends: written at once, their commit and its disk flushes
// would land while the agent starts, and a busy host would pay a commit
// per event. A crash loses at most the last second of events; a clean
// stop writes them all.
const eventWriteDelay = time.Second

// Daemon is one run of marshald.
type Daemon struct {
	cfg     Config
	log     *slog.Logger
	clock   clock.WithTicker
	started time.Time

	db       *state.DB
	auth     *admission.Authority
	pressure pressureMonitor
	levels   *levelChanges
	metrics  *metrics.Metrics
	recorder *events.Recorder
	// control attributes the callers of the local API.
	control   *controlPlane
	backend   cgroup.Backend
	launcher  *launch.Launcher
	egress    *egressProxy
	stopper   *agentstop.Stopper
	stores    *controllers.Stores
	declarer  *intake.Declarer
	source    manifestSource // dir, or kube's source
	dir       *source.Source // the config dir's source; nil with --source kubernetes
	kube      *kubernetes
	manager   *controllers.Manager
	server    *apiserver.Server
	view      *view
	ln        net.Listener
	metricsLn net.Listener
	// dgView, devguard and devguardLn serve DevGuard's wire, when
	// --devguard-socket is given; dgView is always made, so that the
	// consumers are served to the authority whatever the socket.
	dgView     *devguardView
	devguard   *devguardwire.Server
	devguardLn net.Listener
	ready      atomic.Bool
	// closers close what New opened, in reverse order.
	closers []func() error
}

// Run runs marshald with cfg until ctx ends. Cancellation is a clean
// stop: it returns nil. Agents keep running.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	d, err := New(ctx, cfg, log)
	if err != nil {
		return err
	}
	return d.Run(ctx)
}

// New opens everything marshald needs (state, backend, socket) and wires
// its components; Run runs them. On error nothing is left open.
func New(ctx context.Context, cfg Config, log *slog.Logger) (_ *Daemon, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.absolute(); err != nil {
		return nil, err
	}
	d := &Daemon{cfg: cfg, log: log, clock: clock.RealClock{}, levels: newLevelChanges()}
	d.started = d.clock.Now().UTC().Truncate(time.Second)
	defer func() {
		if err != nil {
			d.close()
		}
	}()

	// The backend first: a host where none works is told so before
	// anything is written to the state dir.
	if d.backend = cfg.backend; d.backend == nil {
		d.backend, err = detect.Open(ctx, detect.Options{Backend: cfg.Backend, CgroupRoot: cfg.CgroupRoot, User: cfg.Mode == ModeUser})
		var none *detect.NoBackendError
		if errors.As(err, &none) {
			return nil, err // it says what it is about
		}
		if err != nil {
			return nil, fmt.Errorf("cgroup backend: %w", err)
		}
		d.closers = append(d.closers, func() error { return detect.Close(d.backend) })
	}
	if err := prepareStateDir(cfg.StateDir, log.Warn); err != nil {
		return nil, err
	}
	if _, err := os.Stat(cfg.stateFile()); errors.Is(err, fs.ErrNotExist) {
		if err := d.createJournal(); err != nil {
			return nil, err
		}
	}
	if d.db, err = state.Open(cfg.stateFile()); err != nil {
		if errors.Is(err, state.ErrInUse) {
			return nil, fmt.Errorf("%w: is another marshald running with state dir %s?", err, cfg.StateDir)
		}
		return nil, err
	}
	d.closers = append(d.closers, d.db.Close)
	if d.recorder, err = events.New(events.Options{Store: d.db, Clock: d.clock, Logger: log, WriteDelay: eventWriteDelay}); err != nil {
		return nil, fmt.Errorf("loading events: %w", err)
	}
	d.stopper = agentstop.New(d.backend, d.clock, log)
	d.stores = controllers.NewStores()
	if err := d.openAuthority(); err != nil {
		return nil, err
	}
	mount := cfg.cgroupMount
	if mount == "" {
		mounts, err := cgroup.ReadMounts()
		if err != nil {
			return nil, err
		}
		mount = mounts.V2
	}
	if d.declarer, err = intake.NewDeclarer(d.stores, d.db, d.clock, log); err != nil {
		return nil, fmt.Errorf("loading generations: %w", err)
	}
	if cfg.Source == SourceKubernetes {
		if err := d.openKubernetes(ctx, d.declarer); err != nil {
			return nil, err
		}
	} else {
		d.dir = source.New(source.Options{
			Dir: cfg.ConfigDir, Sink: d.declarer, Store: d.db, Recorder: d.recorder,
			Logger: log, Relist: cfg.Relist,
		})
		d.source = d.dir
	}
	// The controllers and the launcher need each other, at run time
	// only: the controllers ask about launches while they reconcile, the
	// launcher tells them when a launch changed. The controllers come
	// first and reach the launcher through launches, bound as soon as it
	// exists; neither calls the other before Run.
	launches := &launchesView{}
	queues := metrics.NewWorkqueue()
	d.manager, err = controllers.Setup(d.stores, d.backend, d.recorder, controllers.Options{
		Interval: cfg.Relist, Logger: log, MetricsProvider: queues, Launches: launches,
		Egress: &egressView{d},
	})
	if err != nil {
		return nil, err
	}
	d.closers = append(d.closers, d.manager.Close)
	d.wireAuthority()
	d.wireConsumers()
	if err := d.newMetrics(queues); err != nil {
		return nil, err
	}
	if err := d.newEgress(mount); err != nil {
		return nil, err
	}
	if err := d.newLauncher(mount); err != nil {
		return nil, err
	}
	launches.l = d.launcher
	d.egress.launches.l = d.launcher
	d.control = &controlPlane{
		surface: surfaceAPI, launches: d.egress.launches, host: d.egress.launches.host, desired: d.stores.Desired,
		recorder: d.recorder, metrics: d.metrics, log: log.With("component", "control"),
	}
	opts := apiserver.Options{Logger: log, Metrics: d.metrics.Handler(), Control: d.control}
	if cfg.AllowGID >= 0 {
		gid := uint32(cfg.AllowGID)
		opts.AllowGID = &gid
		d.ln, err = apiserver.ListenGroup(cfg.Socket, cfg.AllowGID)
	} else {
		d.ln, err = apiserver.Listen(cfg.Socket)
	}
	if err != nil {
		return nil, fmt.Errorf("socket %s: %w", cfg.Socket, err)
	}
	d.closers = append(d.closers, d.ln.Close)
	d.view = newView(d)
	d.server = apiserver.New(d.view, opts)
	if err := d.listenDevGuard(); err != nil {
		return nil, err
	}
	if cfg.MetricsAddress != "" {
		if d.metricsLn, err = metrics.ListenTCP(ctx, cfg.MetricsAddress); err != nil {
			return nil, fmt.Errorf("--metrics-address: %w", err)
		}
		d.closers = append(d.closers, d.metricsLn.Close)
	}
	return d, nil
}

// Run runs the daemon until ctx ends, then closes what New opened.
func (d *Daemon) Run(ctx context.Context) error {
	defer d.close()
	d.log.Info("starting", "version", version.Get().String(), "mode", d.cfg.Mode, "config", d.manifestsFrom(), "state", d.cfg.StateDir,
		"socket", d.cfg.Socket, "backend", d.backend.Name())
	return d.run(ctx, d.ln)
}

// close closes what New opened, last first.
func (d *Daemon) close() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		if err := d.closers[i](); err != nil && !errors.Is(err, net.ErrClosed) {
			d.log.Warn("closing", "err", err)
		}
	}
	d.closers = nil
}

// run starts every component and waits for all of them. The first to
// fail stops the others.
func (d *Daemon) run(parent context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	// The generations and the events are written until every component,
	// the source among them, has ended, and exact then.
	writing, stopWriting := context.WithCancel(context.WithoutCancel(parent))
	var writers sync.WaitGroup
	writers.Go(func() { d.declarer.Run(writing) })
	writers.Go(func() { d.recorder.Run(writing) })
	defer func() {
		stopWriting()
		writers.Wait()
	}()
	start := func(name string, fn func(context.Context) error) {
		wg.Go(func() {
			if err := fn(ctx); err != nil && !errors.Is(err, context.Canceled) {
				errs <- fmt.Errorf("%s: %w", name, err)
				cancel()
			}
		})
	}
	start("admission", d.auth.Run)
	start("launch", d.launcher.Run)
	start("stop", d.stopper.Run)
	wg.Go(func() { d.followAdmission(ctx) })
	wg.Go(func() { d.recordPressure(ctx) })
	start("pressure", d.pressure.Run)
	start("source", d.source.Start)
	if d.kube != nil {
		start("kubernetes", d.runKubernetes)
	}
	if d.metricsLn != nil {
		start("metrics", func(ctx context.Context) error { return d.metrics.Serve(ctx, d.metricsLn) })
	}
	// The controllers start once the config dir is declared and the
	// launches of an earlier run are recovered: before, every live scope
	// would look orphaned, or unknown to the launch path.
	start("controllers", func(ctx context.Context) error {
		select {
		case <-d.source.Synced():
		case <-ctx.Done():
			return nil
		}
		if !d.waitLauncher(ctx) {
			return nil
		}
		return d.manager.Start(ctx)
	})
	start("api", func(ctx context.Context) error { return d.server.Serve(ctx, ln) })
	start("egress", d.runEgress)
	if d.devguard != nil {
		start("devguard", func(ctx context.Context) error { return d.devguard.Serve(ctx, d.devguardLn) })
	}
	wg.Go(func() { d.notifyReady(ctx) })

	<-ctx.Done()
	if parent.Err() != nil {
		d.log.Info("stopping; agents keep running")
		sddaemon.SdNotify(false, sddaemon.SdNotifyStopping)
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// notifyReady tells systemd marshald is ready once the config dir's first
// load is declared, then keeps its watchdog fed until ctx ends.
func (d *Daemon) notifyReady(ctx context.Context) {
	select {
	case <-d.source.Synced():
	case <-ctx.Done():
		return
	}
	d.ready.Store(true)
	st := d.source.Status()
	d.log.Info("ready", "objects", st.Objects, "files", st.Files)
	sddaemon.SdNotify(false, sddaemon.SdNotifyReady+"\nSTATUS="+fmt.Sprintf("%d objects from %s", st.Objects, d.manifestsFrom()))
	interval, err := sddaemon.SdWatchdogEnabled(false)
	if err != nil || interval <= 0 {
		return
	}
	t := d.clock.NewTicker(interval / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			sddaemon.SdNotify(false, sddaemon.SdNotifyWatchdog)
		}
	}
}

func (d *Daemon) info() localapi.Info {
	st := d.source.Status()
	info := localapi.Info{
		Version: version.Get().Version, PID: os.Getpid(), UID: os.Geteuid(), Mode: d.cfg.Mode,
		ConfigDir: d.cfg.ConfigDir, StateDir: d.cfg.StateDir, Socket: d.cfg.Socket,
		Backend: d.backend.Name(), Ready: d.ready.Load(),
		Source: localapi.SourceStatus{
			Dir: st.Dir, Root: st.Root, Missing: st.Missing, Files: st.Files, Objects: st.Objects,
			Held: st.Held, HeldObjects: st.HeldObjects,
		},
	}
	if d.backend.Name() == "cgroupfs" {
		info.CgroupRoot = d.cfg.CgroupRoot
	}
	if e := d.egress.info; e != (localapi.EgressInfo{}) {
		info.Egress = &e
	}
	for _, e := range st.Errors {
		info.Source.Errors = append(info.Source.Errors, localapi.ManifestError{
			File: e.File, Line: e.Line, Kind: e.Kind, Name: e.Name, Field: e.Field, Message: e.Message,
		})
	}
	return info
}
