package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/controllers"
	"github.com/marshal-dev/marshal/internal/apiserver"
	"github.com/marshal-dev/marshal/internal/egress"
	"github.com/marshal-dev/marshal/internal/egress/hostaddr"
	"github.com/marshal-dev/marshal/internal/identity"
	"github.com/marshal-dev/marshal/internal/launch"
	"github.com/marshal-dev/marshal/internal/localapi"
)

// EgressOff turns a listener of the egress proxy off.
const EgressOff = "off"

// defaultEgressPort is the egress proxy's port in system mode; a user's
// marshald adds 1 + uid % 10000, so that users' daemons do not meet. The
// address is stable across restarts: running agents keep the environment
// they were started with.
const defaultEgressPort = 4750

// DefaultEgressAddress is where the egress proxy of a marshald of euid
// listens by default.
func DefaultEgressAddress(euid int) string {
	port := defaultEgressPort
	if euid != 0 {
		port += 1 + euid%10000
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// defaultEgressSocket is the egress proxy's unix socket beside the local
// API's.
func defaultEgressSocket(apiSocket string) string {
	return filepath.Join(filepath.Dir(apiSocket), "marshal-egress.sock")
}

// egressProxy is marshald's egress proxy, its listeners and its audit
// log.
type egressProxy struct {
	proxy    *egress.Proxy
	log      *egress.Log
	launches *egressLaunches
	tcp, uds net.Listener
	info     localapi.EgressInfo
	// hostAddrs are the addresses of the host's interfaces, refused
	// unless a rule names them.
	hostAddrs *hostaddr.Set
	// vars is the environment of launches of a profile that declares
	// egress; nil when the proxy does not listen on TCP.
	vars map[string]string
	// state says whether the proxy listens on TCP, and when not, why
	// and what to do: what the Host's condition, doctor and a refused
	// launch say.
	state egressState
}

// egressState is the TCP listener's state in marshald's own words.
type egressState struct {
	controllers.EgressListener
	// cause and fix make up Message: "not listening on ADDR: address
	// already in use (EADDRINUSE)", "free it, or choose …".
	cause, fix string
}

// egressFix is what to do about a proxy that does not listen on TCP.
const egressFix = "free it, or choose another address with marshald --egress-address 127.0.0.1:PORT (make run MARSHALD_FLAGS='--egress-address 127.0.0.1:PORT')"

// newEgressState says why listening on addr failed with err: the errno's
// text and name, never the whole chain.
func newEgressState(addr string, err error) egressState {
	s := egressState{EgressListener: controllers.EgressListener{Address: addr, Reason: controllers.ReasonEgressListenFailed}, fix: egressFix}
	var errno syscall.Errno
	switch {
	case addr == EgressOff:
		s.Address, s.Reason = "", controllers.ReasonEgressOff
		s.cause = "off (marshald --egress-address off)"
		s.fix = "start marshald with --egress-address 127.0.0.1:PORT to serve profiles that declare egress"
	case errors.As(err, &errno):
		if errno == syscall.EADDRINUSE {
			s.Reason = controllers.ReasonEgressAddressInUse
		}
		s.cause = fmt.Sprintf("not listening on %s: %s (%s)", addr, errno.Error(), unix.ErrnoName(errno))
	default:
		s.cause = fmt.Sprintf("not listening on %s: listen failed", addr)
	}
	s.Message = s.cause + "; " + s.fix
	return s
}

// TCP is the listener's state, for the controllers.
func (x *egressView) TCP() controllers.EgressListener { return x.d.egress.state.EgressListener }

// egressView shows the controllers the proxy, which exists only after
// them.
type egressView struct{ d *Daemon }

// unavailable is the cause of a refused launch under a profile that
// declares egress.
func (s egressState) unavailable() error {
	return &launch.EgressUnavailableError{Cause: s.cause, Fix: s.fix}
}

// newEgress opens the audit log and the listeners and makes the proxy; the
// launcher is bound to it once it exists. A default TCP address that is
// taken is logged and left off, and launches of profiles that declare
// egress are refused; an address given by flag must be had.
func (d *Daemon) newEgress(mount string) error {
	host, err := identity.SelfNetNS()
	if err != nil {
		return fmt.Errorf("egress: %w", err)
	}
	e := &egressProxy{launches: &egressLaunches{host: host}}
	if e.log, err = egress.OpenLog(filepath.Join(d.cfg.StateDir, "egress"), egress.LogOptions{Logger: d.log}); err != nil {
		return err
	}
	d.closers = append(d.closers, e.log.Close)
	e.state = newEgressState(EgressOff, nil)
	if addr := d.cfg.EgressAddress; addr != EgressOff {
		e.tcp, err = egress.ListenTCP(addr)
		switch {
		case err == nil:
			d.closers = append(d.closers, e.tcp.Close)
			e.info.Address = e.tcp.Addr().String()
			e.vars = proxyVars(e.info.Address)
			e.state = egressState{EgressListener: controllers.EgressListener{Listening: true, Address: e.info.Address,
				Reason: controllers.ReasonEgressListening, Message: "listening on " + e.info.Address}}
		case d.cfg.egressAddressGiven:
			return fmt.Errorf("--egress-address: %w", err)
		default:
			e.state = newEgressState(addr, err)
			d.log.Error("the egress proxy is "+e.state.cause+"; launches of profiles that declare egress are refused (choose an address with --egress-address)",
				"reason", e.state.Reason)
		}
	}
	if path := d.cfg.EgressSocket; path != EgressOff {
		if d.cfg.AllowGID >= 0 {
			e.uds, err = apiserver.ListenGroup(path, d.cfg.AllowGID)
		} else {
			e.uds, err = apiserver.Listen(path)
		}
		if err != nil {
			return fmt.Errorf("egress socket %s: %w", path, err)
		}
		d.closers = append(d.closers, e.uds.Close)
		e.info.Socket = path
	}
	if e.hostAddrs, err = hostaddr.New(); err != nil {
		return fmt.Errorf("egress: the host's addresses: %w", err)
	}
	e.proxy, err = egress.New(egress.Options{
		Launches: e.launches, Policies: egress.StorePolicies{Desired: d.stores.Desired}, CgroupMount: mount, NetNS: host,
		Audit: e.log, Events: d.recorder, Metrics: d.metrics, Logger: d.log.With("component", "egress"),
		HostAddresses: e.hostAddrs,
	})
	if err != nil {
		return err
	}
	d.egress = e
	return nil
}

// proxyVars is the environment that points a launch's tools at the
// proxy at addr: HTTP(S) through it, everything else through SOCKS5
// with names resolved by the proxy, and nothing exempt. Both spellings
// are set, since tools differ in which they read, and so that a caller's
// own no_proxy is not inherited.
func proxyVars(addr string) map[string]string {
	http, socks := "http://"+addr, "socks5h://"+addr
	return map[string]string{
		"HTTP_PROXY": http, "http_proxy": http,
		"HTTPS_PROXY": http, "https_proxy": http,
		"ALL_PROXY": socks, "all_proxy": socks,
		"NO_PROXY": "", "no_proxy": "",
	}
}

// runEgress keeps the host's addresses current, and serves the proxy
// once the config dir is declared and the launches of an earlier run are
// recovered, so that a running agent's first connection after a restart
// is decided on its own rules; until then connections wait in the
// listeners' backlog.
func (d *Daemon) runEgress(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var addrsErr error
	wg.Go(func() {
		if addrsErr = d.egress.hostAddrs.Run(ctx); addrsErr != nil {
			addrsErr = fmt.Errorf("the host's addresses: %w", addrsErr)
			cancel()
		}
	})
	err := d.serveEgress(ctx)
	cancel()
	wg.Wait()
	return errors.Join(err, addrsErr)
}

func (d *Daemon) serveEgress(ctx context.Context) error {
	select {
	case <-d.source.Synced():
	case <-ctx.Done():
		return nil
	}
	if !d.waitLauncher(ctx) {
		return nil
	}
	var lns []net.Listener
	for _, ln := range []net.Listener{d.egress.tcp, d.egress.uds} {
		if ln != nil {
			lns = append(lns, ln)
		}
	}
	return d.egress.proxy.Run(ctx, lns...)
}

// EgressLog reads the records of the audit log that q selects.
func (v *view) EgressLog(ctx context.Context, q apiserver.EgressQuery, fn func([]byte) error, caughtUp func() error) error {
	return q.Select(ctx, v.d.egress.log.Read, fn, caughtUp)
}

// egressLaunches is the launcher's record as the proxy reads it; l is
// bound once the launcher exists, before anything runs. host is
// marshald's network namespace, the one launches in the host's are in.
type egressLaunches struct {
	l    *launch.Launcher
	host identity.NetNS
}

func (x *egressLaunches) launchOf(i launch.Info) egress.Launch {
	l := egress.Launch{ID: i.ID, Profile: i.Profile, Workspace: i.Workspace, Attempt: i.Attempt, Path: i.Path}
	l.NetNS, _ = x.l.NetNS(i.ID, x.host)
	return l
}

func (x *egressLaunches) Launch(id string) (egress.Launch, bool) {
	i, ok := x.l.Info(id)
	if !ok {
		return egress.Launch{}, false
	}
	return x.launchOf(i), true
}

func (x *egressLaunches) Launches() []egress.Launch {
	infos := x.l.Launches()
	out := make([]egress.Launch, len(infos))
	for i, info := range infos {
		out[i] = x.launchOf(info)
	}
	return out
}

// egressCheck says whether the egress proxy listens where launches on
// the host's network reach it. A listener that failed fails the check;
// one turned off fails it only when a declared profile needs it.
func (d *Daemon) egressCheck() localapi.Check {
	st := d.egress.state
	c := localapi.Check{Name: "egress proxy", OK: st.Listening, Detail: st.Message}
	if st.Listening {
		return c
	}
	c.Detail, c.Fix = "launches of profiles that declare egress are refused: the proxy is "+st.cause, st.fix
	if st.Reason == controllers.ReasonEgressOff {
		needs := d.egressNeeded()
		c.OK = needs == ""
		if c.OK {
			c.Detail, c.Fix = "off (marshald --egress-address off); nothing declared needs it", ""
		} else {
			c.Detail += "; profile " + needs + " needs it"
		}
	}
	return c
}

// egressNeeded names a declared profile whose launches need the proxy's
// TCP listener, "" when none does.
func (d *Daemon) egressNeeded() string {
	for _, obj := range d.stores.Desired.List(v1alpha1.KindProfile) {
		if p, ok := obj.(*v1alpha1.Profile); ok && p.Spec.Egress != nil && p.Spec.Isolation != v1alpha1.IsolationNetns {
			return p.Metadata.Name
		}
	}
	return ""
}
