package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/marshal-dev/marshal/internal/client"
	"github.com/marshal-dev/marshal/internal/localapi"
)

const doctorLong = `Doctor says what this host can enforce and what is missing, with the fix for
each check that fails.

First the checks marshalctl makes itself, which need no daemon: the
cgroup2 mount (and v1 hierarchies on a hybrid host), where the cpu,
memory and pids controllers are (delegated in cgroup2, or in v1), whether
the systemd manager marshald would use answers, the config and state
dirs (marshald's when it answers, else those --config-dir and
--state-dir name, else its mode's defaults), and whether marshald
answers on its socket. These run whether or not marshald does, and
before it ever has.

Then, when marshald answers, its own: the cgroup backend in use; per
resource (cpu, memory, pids) the highest level it can hold (accounted,
cooperative or kernel), how, and through which kernel file; and each
check it ran.

Exit status: 0 when every check passes, 1 when any fails (marshald not
running included).`

func newDoctorCmd(g *globals, s Streams) *cobra.Command {
	var flags hostDirs
	cmd := &cobra.Command{
		Use:   "doctor [--config-dir DIR] [--state-dir DIR]",
		Short: "Show what this host can enforce, and how to fix what is missing",
		Long:  doctorLong,
		Example: `  marshalctl doctor
  marshalctl doctor --config-dir ~/agents/manifests.d   # the dirs marshald is started with
  marshalctl doctor || echo "something to fix"`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			report, failed := doctor(cmd.Context(), g, flags)
			if _, err := io.WriteString(s.Out, report); err != nil {
				return err
			}
			if failed {
				return &ExitError{Code: ExitNo, Silent: true}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&flags.config, "config-dir", "", "the config dir to check when marshald does not answer (default: its mode's)")
	f.StringVar(&flags.state, "state-dir", "", "the state dir to check when marshald does not answer (default: its mode's)")
	return cmd
}

// doctor runs the local checks and, when marshald answers, asks for its
// report; it returns the report and whether any check failed. A socket
// that cannot even be found (no XDG_RUNTIME_DIR) is the marshald check
// failing: the host's own checks need no daemon.
func doctor(ctx context.Context, g *globals, flags hostDirs) (string, bool) {
	var b strings.Builder
	failed, total := 0, 0
	dirs := defaultDirs(localHost)
	daemon := localapi.Check{Name: "marshald"}
	var (
		info    localapi.Info
		infoErr error
		c       *client.Client
	)
	socket, err := localapi.ResolveSocketFor(g.socket, localHost.euid, localHost.getenv)
	if err != nil {
		// The error says what to do.
		infoErr, daemon.Detail = err, err.Error()
	} else {
		c = client.New(socket)
		info, infoErr = c.Info(ctx)
		switch {
		case infoErr == nil:
			dirs = hostDirs{config: info.ConfigDir, state: info.StateDir}
			daemon.OK, daemon.Detail = true, fmt.Sprintf("running at %s (pid %d, version %s, %s mode)", socket, info.PID, orDash(info.Version), orDash(info.Mode))
		case errors.Is(infoErr, client.ErrUnreachable):
			daemon.Detail = "not running at " + socket
			daemon.Fix = "start it: marshald, or systemctl --user start marshald (systemctl start marshald as root)"
		default:
			daemon.Detail = daemonError(infoErr).Error()
		}
	}
	if flags.config != "" {
		dirs.config = flags.config
	}
	if flags.state != "" {
		dirs.state = flags.state
	}
	local := append(localChecks(ctx, localHost, dirs), daemon)
	b.WriteString("This host, as marshalctl sees it:\n")
	failed += writeChecks(&b, local)
	total += len(local)
	if infoErr == nil {
		d, err := c.Doctor(ctx)
		if err != nil {
			d.Checks = []localapi.Check{{Name: "marshald's report", Detail: daemonError(err).Error()}}
		}
		b.WriteString("\nmarshald:\n")
		failed += writeDoctor(&b, d)
		total += len(d.Checks)
	}
	if failed > 0 {
		fmt.Fprintf(&b, "\n%d of %s failed\n", failed, plural(total, "check"))
	} else {
		fmt.Fprintf(&b, "\n%s passed\n", plural(total, "check"))
	}
	return b.String(), failed > 0
}

// writeChecks writes one line per check, with the fix of each that
// failed, and returns how many failed.
func writeChecks(b *strings.Builder, checks []localapi.Check) (failed int) {
	for _, c := range checks {
		mark := "✔"
		if !c.OK {
			mark = "✘"
			failed++
		}
		line := "  " + mark + " " + c.Name
		if c.Detail != "" {
			line += ": " + c.Detail
		}
		b.WriteString(line + "\n")
		if !c.OK && c.Fix != "" {
			b.WriteString("      fix: " + c.Fix + "\n")
		}
	}
	return failed
}

// writeDoctor writes marshald's report and returns how many of its
// checks failed.
func writeDoctor(b *strings.Builder, d localapi.Doctor) (failed int) {
	fmt.Fprintf(b, "  Backend: %s\n", orDash(d.Backend))
	if len(d.Enforcement) == 0 {
		b.WriteString("  Enforcement: none reported\n")
	} else {
		rows := make([][]string, len(d.Enforcement))
		for i, e := range d.Enforcement {
			rows[i] = []string{e.Resource, string(e.Level), e.Method, orDash(e.Controller)}
		}
		newTable("RESOURCE", "LEVEL", "METHOD", "CONTROLLER").write(b, "  ", rows)
	}
	if len(d.Checks) == 0 {
		b.WriteString("  no checks reported\n")
	}
	return writeChecks(b, d.Checks)
}
