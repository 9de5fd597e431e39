package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/client"
	"github.com/marshal-dev/marshal/internal/localapi"
)

const diffLong = `Diff compares local manifests with what marshald has declared now, object by
object, and prints a unified diff of each one that differs: the live
declaration (---) against the local one (+++), both as YAML of kind, name,
labels and the spec with its defaults filled in. Status and the fields
marshald sets are ignored. An object marshald does not declare shows as
all added.

-f is a file, a directory or - for standard input, as apply takes them.

Exit status: 0 when nothing differs, 1 when something does, 2 on a usage
error, 3 when a manifest is invalid, a file cannot be read or marshald
cannot be reached.`

func newDiffCmd(g *globals, s Streams) *cobra.Command {
	var files []string
	cmd := &cobra.Command{
		Use:   "diff -f FILE|DIR|-",
		Short: "Show how local manifests differ from what marshald declares",
		Long:  diffLong,
		Example: `  marshalctl diff -f manifests/
  marshalctl diff -f coder.yaml && echo "in sync"`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(files) == 0 {
				return usageError("diff needs -f FILE|DIR|-")
			}
			ctx := cmd.Context()
			m, err := readManifests(ctx, s.In, files)
			if err != nil {
				return &ExitError{Code: ExitFailure, Err: err}
			}
			if len(m.Errors) > 0 {
				writeManifestErrors(s.Err, m.Errors, "cannot diff")
				return &ExitError{Code: ExitFailure, Silent: true}
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			live := liveObjects{c: c, byKind: map[string]map[string]json.RawMessage{}}
			differ := 0
			var b strings.Builder
			for _, o := range m.Objects {
				kind, name := o.GetTypeMeta().Kind, o.GetObjectMeta().Name
				local, err := declaredYAML(o.Object)
				if err != nil {
					return &ExitError{Code: ExitFailure, Err: err}
				}
				raw, err := live.get(ctx, kind, name)
				if err != nil {
					return daemonError(err)
				}
				var current string
				if raw != nil {
					obj := v1alpha1.New(kind)
					if err := json.Unmarshal(raw, obj); err != nil {
						return &ExitError{Code: ExitFailure, Err: fmt.Errorf("reading %s %q from marshald: %w", kind, name, err)}
					}
					if current, err = declaredYAML(obj); err != nil {
						return &ExitError{Code: ExitFailure, Err: err}
					}
				}
				if current == local {
					continue
				}
				differ++
				ref := strings.ToLower(kind) + "/" + name
				writeUnified(&b, "live/"+ref, "local/"+ref, lines(current), lines(local))
			}
			if _, err := io.WriteString(s.Out, b.String()); err != nil {
				return err
			}
			if differ > 0 {
				return &ExitError{Code: ExitNo, Silent: true}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "manifest file, directory, or - for standard input (repeatable)")
	return cmd
}

// liveObjects fetches the live objects of each kind once.
type liveObjects struct {
	c      *client.Client
	byKind map[string]map[string]json.RawMessage
}

// get returns the live object, or nil when marshald has none of that
// name.
func (l *liveObjects) get(ctx context.Context, kind, name string) (json.RawMessage, error) {
	objs, ok := l.byKind[kind]
	if !ok {
		res, ok := localapi.ResourceFor(kind)
		if !ok {
			return nil, fmt.Errorf("kind %s is not served by marshald", kind)
		}
		items, err := l.c.List(ctx, res.Plural)
		if err != nil {
			return nil, err
		}
		objs = make(map[string]json.RawMessage, len(items))
		for _, item := range items {
			objs[objectName(item)] = item
		}
		l.byKind[kind] = objs
	}
	return objs[name], nil
}

// declaredYAML is what a person declares about obj, as YAML: apiVersion,
// kind, name, labels and spec.
func declaredYAML(obj v1alpha1.Object) (string, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return "", err
	}
	var parts struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(data, &parts); err != nil {
		return "", err
	}
	type meta struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels,omitempty"`
	}
	data, err = json.Marshal(struct {
		APIVersion string          `json:"apiVersion"`
		Kind       string          `json:"kind"`
		Metadata   meta            `json:"metadata"`
		Spec       json.RawMessage `json:"spec"`
	}{obj.GetTypeMeta().APIVersion, obj.GetTypeMeta().Kind, meta{obj.GetObjectMeta().Name, obj.GetObjectMeta().Labels}, parts.Spec})
	if err != nil {
		return "", err
	}
	y, err := jsonToYAML(data)
	return string(y), err
}

// lines splits text into lines without their newlines.
func lines(text string) []string {
	if text == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(text, "\n"), "\n")
}
