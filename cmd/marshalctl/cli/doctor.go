package cli

import (
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
dirs (marshald's when it answers, else its mode's defaults), and whether
marshald answers on its socket.

Then, when marshald answers, its own: the cgroup backend in use; per
resource (cpu, memory, pids) the highest level it can hold (accounted,
cooperative or kernel), how, and through which kernel file; and each
check it ran.

Exit status: 0 when every check passes, 1 when any fails (marshald not
running included).`

func newDoctorCmd(g *globals, s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Show what this host can enforce, and how to fix what is missing",
		Long:  doctorLong,
		Example: `  marshalctl doctor
  marshalctl doctor || echo "something to fix"`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := g.client()
			if err != nil {
				return err
			}
			var b strings.Builder
			failed, total := 0, 0
			dirs := defaultDirs(localHost)
			daemon := localapi.Check{Name: "marshald"}
			info, infoErr := c.Info(ctx)
			if infoErr == nil {
				dirs = hostDirs{config: info.ConfigDir, state: info.StateDir}
				daemon.OK, daemon.Detail = true, fmt.Sprintf("running at %s (pid %d, version %s, %s mode)", c.Socket(), info.PID, orDash(info.Version), orDash(info.Mode))
			} else {
				daemon.Detail = daemonError(infoErr).Error()
				if errors.Is(infoErr, client.ErrUnreachable) {
					daemon.Detail = "not running at " + c.Socket()
				}
				daemon.Fix = "start it: marshald, or systemctl --user start marshald (systemctl start marshald as root)"
			}
			local := append(localChecks(ctx, localHost, dirs), daemon)
			b.WriteString("This host, as marshalctl sees it:\n")
			failed += writeChecks(&b, local)
			total += len(local)
			if infoErr == nil {
				d, err := c.Doctor(ctx)
				if err != nil {
					return daemonError(err)
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
			if _, err := io.WriteString(s.Out, b.String()); err != nil {
				return err
			}
			if failed > 0 {
				return &ExitError{Code: ExitNo, Silent: true}
			}
			return nil
		},
	}
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
