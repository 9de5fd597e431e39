package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/marshal-dev/marshal/internal/version"
)

const versionLong = `Version prints which build of marshalctl this is (module version, commit
and Go toolchain) and, unless --client is given, the version of the
marshald it talks to. When marshald cannot be reached, a note says so on
standard error and only marshalctl's version is printed.

-o json prints the same as one JSON object, for scripts; "daemon" is
absent when marshald was not asked or did not answer.

Exit status: 0 on success, 2 on a usage error.`

// versionTimeout bounds how long version waits for marshald.
var versionTimeout = 2 * time.Second

// versionOutput is what version -o json prints.
type versionOutput struct {
	Client version.Info   `json:"client"`
	Daemon *daemonVersion `json:"daemon,omitempty"`
}

type daemonVersion struct {
	Version string `json:"version"`
	Socket  string `json:"socket"`
}

func newVersionCmd(g *globals, s Streams) *cobra.Command {
	var (
		output     string
		clientOnly bool
	)
	cmd := &cobra.Command{
		Use:   "version [--client] [-o json]",
		Short: "Print the version and commit of marshalctl and of marshald",
		Long:  versionLong,
		Example: `  marshalctl version
  marshalctl version --client -o json`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && output != "json" {
				return usageError("unknown output format %q (want json)", output)
			}
			out := versionOutput{Client: version.Get()}
			if !clientOnly {
				d, err := g.daemonVersion(cmd.Context())
				if err != nil {
					fmt.Fprintf(s.Err, "note: marshald's version is unknown: %v\n", err)
				}
				out.Daemon = d
			}
			if output == "json" {
				enc := json.NewEncoder(s.Out)
				enc.SetIndent("", "    ")
				return enc.Encode(out)
			}
			fmt.Fprintf(s.Out, "marshalctl %s\n", out.Client)
			if out.Daemon != nil {
				fmt.Fprintf(s.Out, "marshald   %s at %s\n", out.Daemon.Version, out.Daemon.Socket)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json")
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print marshalctl's version only; do not ask marshald")
	return cmd
}

// daemonVersion asks marshald its version, for versionTimeout at most.
func (g *globals) daemonVersion(ctx context.Context) (*daemonVersion, error) {
	c, err := g.client()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	info, err := c.Info(ctx)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("marshald at %s did not answer within %v", c.Socket(), versionTimeout)
		}
		return nil, err
	}
	return &daemonVersion{Version: info.Version, Socket: c.Socket()}, nil
}
