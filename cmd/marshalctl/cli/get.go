package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/marshal-dev/marshal/internal/client"
	"github.com/marshal-dev/marshal/internal/localapi"
)

const getLong = `Get lists the objects of one kind as marshald sees them, with their status,
or shows one object by name.

KIND is profiles, workspaces, hosts or agents, or a short name: profile,
prof, pr; workspace, ws; host; agent, ag.

Output: a table (the default), a wider table (-o wide), or the objects
themselves (-o yaml, -o json; a list is wrapped as kind List). With -w, get
keeps printing changes as they happen until interrupted (Ctrl-C).

When the config dir has manifests that fail to load, or is held, a warning
line goes to standard error.

Exit status: 0 on success, 1 when the named object does not exist, 2 on a
usage error, 3 when marshald cannot be reached.`

func newGetCmd(g *globals, s Streams) *cobra.Command {
	var (
		output string
		watch  bool
	)
	cmd := &cobra.Command{
		Use:   "get KIND [NAME]",
		Short: "List objects of one kind, or show one",
		Long:  getLong,
		Example: `  marshalctl get workspaces
  marshalctl get profile coder -o yaml
  marshalctl get agents -o wide
  marshalctl get ws -w`,
		Args: rangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := resourceArg(args[0])
			if err != nil {
				return err
			}
			switch output {
			case "", "wide", "yaml", "json":
			default:
				return usageError("unknown output format %q (want wide, yaml or json)", output)
			}
			name := ""
			if len(args) == 2 {
				name = args[1]
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			info, err := c.Info(ctx)
			if err != nil {
				return daemonError(err)
			}
			warnSource(s.Err, info.Source)
			items, err := fetch(ctx, c, res, name)
			if err != nil {
				return err
			}
			if watch {
				return watchObjects(ctx, s, c, res, name, output, items)
			}
			return printObjects(s, res, items, name != "", output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: wide, yaml or json")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "after the current objects, print every change until interrupted")
	return cmd
}

// resourceArg resolves a KIND argument.
func resourceArg(kind string) (localapi.Resource, error) {
	res, ok := localapi.ResourceFor(kind)
	if !ok {
		return localapi.Resource{}, usageError("unknown kind %q; known: %s", kind, resourceNames())
	}
	return res, nil
}

// fetch returns the objects of res, or the one named.
func fetch(ctx context.Context, c *client.Client, res localapi.Resource, name string) ([]json.RawMessage, error) {
	if name == "" {
		items, err := c.List(ctx, res.Plural)
		return items, daemonError(err)
	}
	obj, err := c.Get(ctx, res.Plural, name)
	if err != nil {
		return nil, notFoundHint(daemonError(err), res)
	}
	return []json.RawMessage{obj}, nil
}

// notFoundHint adds to a NOT_FOUND error how to see what exists.
func notFoundHint(err error, res localapi.Resource) error {
	var ee *ExitError
	if errors.As(err, &ee) && ee.Code == ExitNo {
		return &ExitError{Code: ExitNo, Err: fmt.Errorf("%w; marshalctl get %s lists them", ee.Err, res.Plural)}
	}
	return err
}

// printObjects prints items in the output format: one object as itself
// when single, else a table or a List.
func printObjects(s Streams, res localapi.Resource, items []json.RawMessage, single bool, output string) error {
	switch output {
	case "yaml", "json":
		var doc any = listOf(items)
		if single {
			doc = items[0]
		}
		return printDocument(s.Out, doc, output)
	}
	if len(items) == 0 {
		fmt.Fprintf(s.Err, "No %s found.\n", res.Plural)
		return nil
	}
	t, rows, _, err := views[res.Kind].table(items, output == "wide")
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: err}
	}
	return t.write(s.Out, "", rows)
}

// objectList is a list as kubectl prints one.
type objectList struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Items      []json.RawMessage `json:"items"`
}

func listOf(items []json.RawMessage) *objectList {
	if items == nil {
		items = []json.RawMessage{}
	}
	return &objectList{APIVersion: "v1", Kind: "List", Items: items}
}

// printDocument prints v as indented JSON or as YAML.
func printDocument(w io.Writer, v any, output string) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if output == "yaml" {
		y, err := jsonToYAML(data)
		if err != nil {
			return err
		}
		_, err = w.Write(y)
		return err
	}
	var b bytes.Buffer
	if err := json.Indent(&b, data, "", "    "); err != nil {
		return err
	}
	b.WriteByte('\n')
	_, err = w.Write(b.Bytes())
	return err
}

// objectName reads metadata.name.
func objectName(obj json.RawMessage) string {
	var v struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	json.Unmarshal(obj, &v)
	return v.Metadata.Name
}

// watchObjects prints the current objects, then every change, until ctx
// ends. A table prints a row per change, aligned with the first rows; a
// deleted object's row ends in "(deleted)". YAML and JSON print the
// object at each change.
func watchObjects(ctx context.Context, s Streams, c *client.Client, res localapi.Resource, name, output string, items []json.RawMessage) error {
	wide := output == "wide"
	v := views[res.Kind]
	structured := output == "yaml" || output == "json"
	var (
		t     *table
		extra bool
		// shown holds what the first table printed, so the watch's own
		// ADDED events for those objects are not printed twice.
		shown = map[string]json.RawMessage{}
	)
	if !structured {
		var rows [][]string
		var err error
		t, rows, extra, err = v.table(items, wide)
		if err != nil {
			return &ExitError{Code: ExitFailure, Err: err}
		}
		if err := t.write(s.Out, "", rows); err != nil {
			return err
		}
		for _, item := range items {
			shown[objectName(item)] = item
		}
	}
	first := true
	err := c.Watch(ctx, res.Plural, func(ev localapi.WatchEvent) error {
		n := objectName(ev.Object)
		if name != "" && n != name {
			return nil
		}
		if prev, ok := shown[n]; ok {
			delete(shown, n)
			if ev.Type == localapi.Added && bytes.Equal(prev, ev.Object) {
				return nil
			}
		}
		if structured {
			if output == "yaml" && !first {
				io.WriteString(s.Out, "---\n")
			}
			first = false
			return printDocument(s.Out, ev.Object, output)
		}
		row, err := v.cells(ev.Object, wide, extra)
		if err != nil {
			return err
		}
		t.fit(row)
		line := t.format(row)
		if ev.Type == localapi.Deleted {
			line = strings.TrimSuffix(line, "\n") + columnGap + "(deleted)\n"
		}
		_, err = io.WriteString(s.Out, line)
		return err
	})
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil
	}
	if errors.Is(err, client.ErrStreamEnded) {
		return &ExitError{Code: ExitFailure, Err: errors.New("marshald ended the watch: it is stopping or restarting; run the command again")}
	}
	return daemonError(err)
}
