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

const getLong = `Get lists objects as marshald sees them, with their status, or shows the
objects named.

KIND is profiles, workspaces, hosts or agents, or a short name: profile,
prof, pr; workspace, ws; host; agent, ag. Several kinds are separated by
commas (profiles,workspaces); all is every kind. Objects are named after
one KIND, or each as KIND/NAME (profile/coder ws/webapp).

-l/--selector narrows a list to the objects whose labels match, in the
syntax of Kubernetes' label selectors: team=platform, tier!=gold,
env in (dev,ci), env notin (prod), team (the label is set), !retired;
requirements separated by commas must all hold. marshald parses it.

Output: a table (the default; with several kinds one table each, names
as KIND/NAME), a wider table (-o wide), the objects themselves (-o yaml,
-o json; several objects are wrapped as kind List, which apply takes
back), KIND/NAME a line (-o name), a JSONPath template applied to the
object or the List (-o jsonpath='{.items[*].metadata.name}'), or columns
of your own (-o custom-columns=NAME:.metadata.name,ROOT:.spec.root), as
kubectl has them. With -w, get keeps printing changes to one kind as
they happen until interrupted (Ctrl-C).

When the config dir has manifests that fail to load, or is held, a warning
line goes to standard error.

Exit status: 0 on success, 1 when a named object does not exist, 2 on a
usage error, 3 when marshald cannot be reached.`

func newGetCmd(g *globals, s Streams) *cobra.Command {
	var (
		outputFlag string
		selector   string
		watch      bool
	)
	cmd := &cobra.Command{
		Use:   "get KIND[,KIND…]|all [NAME…] | KIND/NAME… [-l SELECTOR] [-o FORMAT] [-w]",
		Short: "List objects of some kinds, or show the ones named",
		Long:  getLong,
		Example: `  marshalctl get workspaces
  marshalctl get profile coder -o yaml
  marshalctl get profiles,workspaces -l team=platform
  marshalctl get all
  marshalctl get agents -o wide
  marshalctl get ws -o jsonpath='{.items[*].spec.root}'
  marshalctl get ws -o custom-columns=NAME:.metadata.name,PROFILE:.spec.profile
  marshalctl get ws -w`,
		RunE: func(cmd *cobra.Command, args []string) error {
			out, err := parseOutput(outputFlag)
			if err != nil {
				return err
			}
			t, err := parseTargets(args, selector)
			if err != nil {
				return err
			}
			if watch && (len(t.kinds) != 1 || len(t.names) > 1) {
				return usageError("-w watches one kind, or one object of it")
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
			if watch {
				name := ""
				if t.single() {
					name = t.names[0].name
				}
				return watchObjects(ctx, s, c, t, name, selector, printer{out, ctx, c})
			}
			got, err := t.fetch(ctx, c, selector)
			if err != nil {
				return err
			}
			return printObjects(s, t, got, printer{out, ctx, c})
		},
	}
	cmd.Flags().StringVarP(&outputFlag, "output", "o", "", "output format: "+getOutputFormats)
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "only objects whose labels match this selector (team=platform, env in (dev,ci))")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "after the current objects, print every change until interrupted")
	return cmd
}

// resourceArg resolves a KIND argument.
func resourceArg(kind string) (localapi.Resource, error) {
	res, ok := localapi.ResourceFor(kind)
	if !ok {
		return localapi.Resource{}, usageError("unknown kind %q; known: %s, or %s", kind, resourceNames(), kindsAll)
	}
	return res, nil
}

// notFoundHint adds to a NOT_FOUND error how to see what exists.
func notFoundHint(err error, res localapi.Resource) error {
	var ee *ExitError
	if errors.As(err, &ee) && ee.Code == ExitNo {
		return &ExitError{Code: ExitNo, Err: fmt.Errorf("%w; marshalctl get %s lists them", ee.Err, res.Plural)}
	}
	return err
}

// printObjects prints what get fetched in the output format: one object
// named as itself, several as a List; tables one per kind.
func printObjects(s Streams, t targets, got []fetched, out printer) error {
	var all []json.RawMessage
	for _, f := range got {
		all = append(all, f.items...)
	}
	if out.structured() {
		var doc any = listOf(all)
		if t.single() {
			doc = all[0]
		}
		return out.document(s.Out, doc)
	}
	if len(all) == 0 {
		fmt.Fprintln(s.Err, noneFound(t))
		return nil
	}
	var b strings.Builder
	switch out.format {
	case outputName:
		for _, f := range got {
			printNames(&b, f.res, f.items)
		}
	case outputCustomColumns:
		tbl, rows, _, err := out.tabulate(localapi.Resource{}, all)
		if err != nil {
			return err
		}
		tbl.write(&b, "", rows)
	default:
		for _, f := range got {
			if len(f.items) == 0 {
				continue
			}
			tbl, rows, _, err := out.tabulate(f.res, f.items)
			if err != nil {
				return err
			}
			if len(t.kinds) > 1 {
				for _, r := range rows {
					r[0] = namedObject{res: f.res, name: r[0]}.ref()
				}
			}
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			tbl.write(&b, "", rows)
		}
	}
	_, err := io.WriteString(s.Out, b.String())
	return err
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
// deleted object's row ends in "(deleted)". Structured outputs print the
// object at each change, -o name its KIND/NAME.
func watchObjects(ctx context.Context, s Streams, c *client.Client, tg targets, name, selector string, out printer) error {
	w := &objectWatch{w: s.Out, res: tg.kinds[0], name: name, out: out, shown: map[string]json.RawMessage{}, first: true}
	// The first listing is taken once the watch has its starting point:
	// a change after that point is in the stream, so none made while the
	// watch starts is missed (an object deleted then would stay on
	// screen). Its error ends the command as a get without -w would.
	var listErr error
	list := func() error {
		got, err := tg.fetch(ctx, c, selector)
		if err == nil {
			err = w.list(got[0].items)
		}
		listErr = err
		return err
	}
	err := c.WatchSelected(ctx, w.res.Plural, selector, list, w.event)
	if listErr != nil {
		return listErr
	}
	return watchEnded(ctx, err)
}

// objectWatch prints what get -w sees of one kind.
type objectWatch struct {
	w    io.Writer
	res  localapi.Resource
	name string // the one object watched, "" for all
	out  printer
	// t is the table of the first listing, extra whether its rows carry
	// the view's extra columns; later rows align with it.
	t     *table
	extra bool
	// shown holds what the first listing printed, so the watch's own
	// ADDED events for those objects are not printed twice.
	shown map[string]json.RawMessage
	first bool // no document printed yet
}

// list prints the first listing.
func (w *objectWatch) list(items []json.RawMessage) error {
	switch {
	case w.out.structured():
		return nil
	case w.out.format == outputName:
		if err := printNames(w.w, w.res, items); err != nil {
			return err
		}
	default:
		t, rows, extra, err := w.out.tabulate(w.res, items)
		if err != nil {
			return err
		}
		w.t, w.extra = t, extra
		if err := t.write(w.w, "", rows); err != nil {
			return err
		}
	}
	for _, item := range items {
		w.shown[objectName(item)] = item
	}
	return nil
}

// event prints one change.
func (w *objectWatch) event(ev localapi.WatchEvent) error {
	n := objectName(ev.Object)
	if w.name != "" && n != w.name {
		return nil
	}
	if prev, ok := w.shown[n]; ok {
		delete(w.shown, n)
		if ev.Type == localapi.Added && bytes.Equal(prev, ev.Object) {
			return nil
		}
	}
	switch {
	case w.out.structured():
		if w.out.format == outputYAML && !w.first {
			io.WriteString(w.w, "---\n")
		}
		w.first = false
		return w.out.document(w.w, ev.Object)
	case w.out.format == outputName:
		return printNames(w.w, w.res, []json.RawMessage{ev.Object})
	}
	row, err := w.out.row(w.res, ev.Object, w.extra)
	if err != nil {
		return err
	}
	w.t.fit(row)
	line := w.t.format(row)
	if ev.Type == localapi.Deleted {
		line = strings.TrimSuffix(line, "\n") + columnGap + "(deleted)\n"
	}
	_, err = io.WriteString(w.w, line)
	return err
}

// watchEnded is the error a command that watched until interrupted ends
// with.
func watchEnded(ctx context.Context, err error) error {
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil
	}
	if errors.Is(err, client.ErrStreamEnded) {
		return &ExitError{Code: ExitFailure, Err: errors.New("marshald ended the watch: it is stopping or restarting; run the command again")}
	}
	return daemonError(err)
}
