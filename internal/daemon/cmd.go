package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/marshal-dev/marshal/internal/version"
)

// Main runs marshald with command-line args (without the program name),
// logging to stderr.
func Main(ctx context.Context, args []string, stderr io.Writer) error {
	cfg, defErr := DefaultConfig(os.Geteuid(), os.Getenv)
	var allowGroup string
	cmd := &cobra.Command{
		Use:   "marshald",
		Short: "Reconcile this host's agents with the manifests in a config dir",
		Long: `marshald watches a config directory of manifests (Profiles, Workspaces, a
Host) and the cgroup tree, and makes the host match the manifests: one slice
per profile with its limits, one scope per agent launch, and admission of
every launch. It serves marshalctl on a unix socket.

User mode (not root) keeps its config in $XDG_CONFIG_HOME/marshal/manifests.d,
its state in $XDG_STATE_HOME/marshal and its socket at
$XDG_RUNTIME_DIR/marshal.sock; system mode (root) uses
/etc/marshal/manifests.d, /var/lib/marshal and /run/marshal/marshal.sock.
Stopping marshald never stops the agents it launched.`,
		Example: `  marshald --config-dir manifests --state-dir .marshal
  marshald --backend cgroupfs --cgroup-root /marshal --log-format json`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if defErr != nil && (!cmd.Flags().Changed("config-dir") || !cmd.Flags().Changed("state-dir")) {
				return defErr
			}
			cfg.egressAddressGiven = cmd.Flags().Changed("egress-address")
			if allowGroup != "" {
				gid, err := lookupGroup(allowGroup)
				if err != nil {
					return err
				}
				cfg.AllowGID = gid
			}
			return Run(cmd.Context(), cfg, newLogger(stderr, cfg.LogFormat))
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.ConfigDir, "config-dir", cfg.ConfigDir, "directory of manifests")
	f.StringVar(&cfg.StateDir, "state-dir", cfg.StateDir, "directory of marshald's state")
	f.StringVar(&cfg.Socket, "socket", cfg.Socket, "unix socket of the local API")
	f.StringVar(&cfg.Backend, "backend", cfg.Backend, "cgroup backend: auto, systemd or cgroupfs")
	f.StringVar(&cfg.CgroupRoot, "cgroup-root", cfg.CgroupRoot, "the cgroupfs backend's parent group, relative to the cgroup2 mount")
	f.StringVar(&cfg.LogFormat, "log-format", cfg.LogFormat, "log format: text or json")
	f.StringVar(&allowGroup, "allow-group", "", "also let members of this group (name or gid) use the socket")
	f.DurationVar(&cfg.Relist, "relist-interval", cfg.Relist, "interval of the periodic relist and drift checks")
	f.BoolVar(&cfg.InitJournal, "init-journal", false, "create the admission journal if it is missing (only needed after it was lost)")
	f.StringVar(&cfg.MetricsAddress, "metrics-address", "", "also serve /metrics on this loopback address, such as 127.0.0.1:9469")
	f.StringVar(&cfg.DevGuardSocket, "devguard-socket", "", "also serve DevGuard's wire protocol to the declared Consumers on this unix socket, such as $XDG_RUNTIME_DIR/devguard/authority.sock")
	f.DurationVar(&cfg.DevGuardFrameDeadline, "devguard-frame-deadline", 0, "bound each DevGuard frame by this in place of DevGuard's 250ms, for tests")
	// Hidden: a DevGuard client expects the authority to keep DevGuard's
	// bound, which hello states whatever this is.
	_ = f.MarkHidden("devguard-frame-deadline")
	kubernetesFlags(f, &cfg)
	f.StringVar(&cfg.Pressure, "pressure", cfg.Pressure, "where admission's pressure level comes from: host (PSI, available memory, the state disk) or off (the whole work capacity, always)")
	f.StringVar(&cfg.EgressAddress, "egress-address", cfg.EgressAddress, "the egress proxy's loopback address, or off; keep it stable: running agents keep the address they were given")
	f.StringVar(&cfg.EgressSocket, "egress-socket", "", "the egress proxy's unix socket, or off (default: marshal-egress.sock beside --socket)")
	cmd.Version = version.Get().String()
	cmd.SetVersionTemplate("marshald {{.Version}}\n")
	cmd.SetArgs(args)
	cmd.SetOut(stderr)
	cmd.SetErr(stderr)
	err := cmd.ExecuteContext(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "marshald: %v\n", err)
	}
	return err
}

func lookupGroup(name string) (int, error) {
	if gid, err := strconv.Atoi(name); err == nil {
		return gid, nil
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, fmt.Errorf("--allow-group: %w", err)
	}
	return strconv.Atoi(g.Gid)
}

// newLogger logs in text or JSON. Under systemd, whose journal stamps every
// line itself, text records carry no time.
func newLogger(w io.Writer, format string) *slog.Logger {
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, nil))
	}
	opts := &slog.HandlerOptions{}
	if os.Getenv("JOURNAL_STREAM") != "" {
		opts.ReplaceAttr = func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
