package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/marshal-dev/marshal/internal/localapi"
)

const doctorLong = `Doctor asks marshald what this host can enforce and what is missing: the
cgroup backend in use; per resource (cpu, memory, pids) the highest level
it can hold (accounted, cooperative or kernel), how, and through which
kernel file; and each check it ran, with the fix for each that failed.

Exit status: 0 when every check passes, 1 when any fails, 3 when marshald
cannot be reached.`

func newDoctorCmd(g *globals, s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Show what this host can enforce, and how to fix what is missing",
		Long:  doctorLong,
		Example: `  marshalctl doctor
  marshalctl doctor || echo "something to fix"`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			d, err := c.Doctor(cmd.Context())
			if err != nil {
				return daemonError(err)
			}
			failed, err := writeDoctor(s.Out, d)
			if err != nil {
				return err
			}
			if failed > 0 {
				return &ExitError{Code: ExitNo, Silent: true}
			}
			return nil
		},
	}
}

func writeDoctor(w io.Writer, d localapi.Doctor) (failed int, err error) {
	var b strings.Builder
	fmt.Fprintf(&b, "Backend: %s\n\n", orDash(d.Backend))
	if len(d.Enforcement) == 0 {
		b.WriteString("Enforcement: none reported\n")
	} else {
		rows := make([][]string, len(d.Enforcement))
		for i, e := range d.Enforcement {
			rows[i] = []string{e.Resource, string(e.Level), e.Method, orDash(e.Controller)}
		}
		newTable("RESOURCE", "LEVEL", "METHOD", "CONTROLLER").write(&b, "", rows)
	}
	b.WriteByte('\n')
	for _, c := range d.Checks {
		mark := "✔"
		if !c.OK {
			mark = "✘"
			failed++
		}
		line := mark + " " + c.Name
		if c.Detail != "" {
			line += ": " + c.Detail
		}
		b.WriteString(line + "\n")
		if !c.OK && c.Fix != "" {
			b.WriteString("    fix: " + c.Fix + "\n")
		}
	}
	switch {
	case len(d.Checks) == 0:
		b.WriteString("no checks reported\n")
	case failed > 0:
		fmt.Fprintf(&b, "\n%d of %s failed\n", failed, plural(len(d.Checks), "check"))
	default:
		fmt.Fprintf(&b, "\n%s passed\n", plural(len(d.Checks), "check"))
	}
	_, err = io.WriteString(w, b.String())
	return failed, err
}
