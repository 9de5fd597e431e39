package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	sddaemon "github.com/coreos/go-systemd/v22/daemon"
	"k8s.io/utils/clock"

	"github.com/marshal-dev/marshal/controllers"
	"github.com/marshal-dev/marshal/internal/apiserver"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/cgroup/detect"
	"github.com/marshal-dev/marshal/internal/events"
	"github.com/marshal-dev/marshal/internal/localapi"
	"github.com/marshal-dev/marshal/internal/source"
	"github.com/marshal-dev/marshal/internal/state"
)

// Version is marshald's version, set at build time.
var Version = "dev"

// Daemon is one run of marshald.
type Daemon struct {
	cfg     Config
	log     *slog.Logger
	clock   clock.WithTicker
	started time.Time

	db       *state.DB
	recorder *events.Recorder
	backend  cgroup.Backend
	stores   *controllers.Stores
	source   *source.Source
	manager  *controllers.Manager
	server   *apiserver.Server
	ready    atomic.Bool
}

// Run runs marshald with cfg until ctx ends. Cancellation is a clean
// stop: it returns nil. Agents keep running.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := cfg.absolute(); err != nil {
		return err
	}
	d := &Daemon{cfg: cfg, log: log, clock: clock.RealClock{}}
	d.started = d.clock.Now().UTC().Truncate(time.Second)

	var err error
	if d.db, err = state.Open(cfg.stateFile()); err != nil {
		if errors.Is(err, state.ErrInUse) {
			return fmt.Errorf("%w: is another marshald running with state dir %s?", err, cfg.StateDir)
		}
		return err
	}
	defer d.db.Close()
	if d.recorder, err = events.New(events.Options{Store: d.db, Logger: log}); err != nil {
		return fmt.Errorf("loading events: %w", err)
	}
	d.backend, err = detect.Open(ctx, detect.Options{Backend: cfg.Backend, CgroupRoot: cfg.CgroupRoot, User: cfg.Mode == ModeUser})
	if err != nil {
		return fmt.Errorf("cgroup backend: %w", err)
	}
	if c, ok := d.backend.(io.Closer); ok {
		defer c.Close()
	}
	d.stores = controllers.NewStores()
	decl, err := newDeclarer(d.stores, d.db, d.clock, log)
	if err != nil {
		return fmt.Errorf("loading generations: %w", err)
	}
	d.source = source.New(source.Options{
		Dir: cfg.ConfigDir, Sink: decl, Store: d.db, Recorder: d.recorder,
		Logger: log, Relist: cfg.Relist,
	})
	d.manager, err = controllers.Setup(d.stores, d.backend, d.recorder, controllers.Options{Interval: cfg.Relist, Logger: log})
	if err != nil {
		return err
	}
	opts := apiserver.Options{Logger: log}
	var ln net.Listener
	if cfg.AllowGID >= 0 {
		gid := uint32(cfg.AllowGID)
		opts.AllowGID = &gid
		ln, err = apiserver.ListenGroup(cfg.Socket, cfg.AllowGID)
	} else {
		ln, err = apiserver.Listen(cfg.Socket)
	}
	if err != nil {
		return fmt.Errorf("socket %s: %w", cfg.Socket, err)
	}
	d.server = apiserver.New(newView(d), opts)

	log.Info("starting", "version", Version, "mode", cfg.Mode, "config", cfg.ConfigDir, "state", cfg.StateDir,
		"socket", cfg.Socket, "backend", d.backend.Name())
	return d.run(ctx, ln)
}

// run starts every component and waits for all of them. The first to
// fail stops the others.
func (d *Daemon) run(parent context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	start := func(name string, fn func(context.Context) error) {
		wg.Go(func() {
			if err := fn(ctx); err != nil && !errors.Is(err, context.Canceled) {
				errs <- fmt.Errorf("%s: %w", name, err)
				cancel()
			}
		})
	}
	start("source", d.source.Start)
	// The controllers start once the config dir is declared: before, every
	// live scope would look orphaned.
	start("controllers", func(ctx context.Context) error {
		select {
		case <-d.source.Synced():
		case <-ctx.Done():
			return nil
		}
		return d.manager.Start(ctx)
	})
	start("api", func(ctx context.Context) error { return d.server.Serve(ctx, ln) })
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
	sddaemon.SdNotify(false, sddaemon.SdNotifyReady+"\nSTATUS="+fmt.Sprintf("%d objects from %s", st.Objects, d.cfg.ConfigDir))
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
		Version: Version, PID: os.Getpid(), UID: os.Geteuid(), Mode: d.cfg.Mode,
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
	for _, e := range st.Errors {
		info.Source.Errors = append(info.Source.Errors, localapi.ManifestError{
			File: e.File, Line: e.Line, Kind: e.Kind, Name: e.Name, Field: e.Field, Message: e.Message,
		})
	}
	return info
}
