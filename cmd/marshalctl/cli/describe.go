package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/localapi"
)

// describeEvents is how many of an object's latest events describe shows.
const describeEvents = 20

const describeLong = `Describe shows objects in full: the spec as declared, every status field,
the conditions (why each is or is not Ready, and whether its manifest
still loads) and the recent events.

KIND is profile, workspace, host or agent, or any name get accepts;
without a NAME every object of the kind is described (those -l selects,
with a selector), one after another. Objects may also be named as
KIND/NAME. An agent's NAME is its scope, as marshalctl get agents -o wide
shows it.

Exit status: 0 on success, 1 when a named object does not exist, 2 on a
usage error, 3 when marshald cannot be reached.`

func newDescribeCmd(g *globals, s Streams) *cobra.Command {
	var selector string
	cmd := &cobra.Command{
		Use:   "describe KIND [NAME…] | KIND/NAME… [-l SELECTOR]",
		Short: "Show objects in full: spec, status, conditions and recent events",
		Long:  describeLong,
		Example: `  marshalctl describe workspace docs
  marshalctl describe profile coder
  marshalctl describe host
  marshalctl describe ws -l team=platform`,
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := parseTargets(args, selector)
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			got, err := t.fetch(ctx, c, selector)
			if err != nil {
				return err
			}
			var events []v1alpha1.Event
			if len(t.names) == 1 {
				n := t.names[0]
				events, err = c.Events(ctx, v1alpha1.ObjectReference{Kind: n.res.Kind, Name: n.name}, 0)
			} else {
				// One request for every object's events.
				events, err = c.Events(ctx, v1alpha1.ObjectReference{}, 0)
			}
			if err != nil {
				return daemonError(err)
			}
			var b strings.Builder
			for _, f := range got {
				for _, obj := range f.items {
					out, err := describe(f.res, obj, eventsOf(events, f.res.Kind, objectName(obj)))
					if err != nil {
						return &ExitError{Code: ExitFailure, Err: err}
					}
					if b.Len() > 0 {
						b.WriteString("\n\n")
					}
					b.WriteString(out)
				}
			}
			if b.Len() == 0 {
				fmt.Fprintln(s.Err, noneFound(t))
				return nil
			}
			_, err = io.WriteString(s.Out, b.String())
			return err
		},
	}
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "describe the objects whose labels match this selector")
	return cmd
}

// eventsOf returns the events about the object kind/name, in order.
func eventsOf(events []v1alpha1.Event, kind, name string) []v1alpha1.Event {
	var out []v1alpha1.Event
	for _, e := range events {
		if e.Object.Kind == kind && e.Object.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// describe writes an object as describe shows it.
func describe(res localapi.Resource, obj json.RawMessage, events []v1alpha1.Event) (string, error) {
	var parts map[string]json.RawMessage
	if err := json.Unmarshal(obj, &parts); err != nil {
		return "", fmt.Errorf("reading %s from marshald: %w", res.Kind, err)
	}
	var meta v1alpha1.ObjectMeta
	if err := json.Unmarshal(parts["metadata"], &meta); err != nil {
		return "", fmt.Errorf("reading %s metadata: %w", res.Kind, err)
	}
	var status map[string]json.RawMessage
	if raw, ok := parts["status"]; ok {
		if err := json.Unmarshal(raw, &status); err != nil {
			return "", fmt.Errorf("reading %s status: %w", res.Kind, err)
		}
	}
	var admission *v1alpha1.AdmissionStatus
	if raw, ok := status["admission"]; ok && res.Kind == v1alpha1.KindHost {
		if err := json.Unmarshal(raw, &admission); err != nil {
			return "", fmt.Errorf("reading %s admission: %w", res.Kind, err)
		}
		delete(status, "admission")
	}
	var conds []v1alpha1.Condition
	if raw, ok := status["conditions"]; ok {
		if err := json.Unmarshal(raw, &conds); err != nil {
			return "", fmt.Errorf("reading %s conditions: %w", res.Kind, err)
		}
		delete(status, "conditions")
	}

	var b strings.Builder
	field := func(label, value string) { fmt.Fprintf(&b, "%-12s%s\n", label+":", value) }
	field("Name", meta.Name)
	field("Kind", res.Kind)
	field("Labels", labels(meta.Labels))
	if t := meta.CreationTimestamp; !t.IsZero() {
		field("Created", fmt.Sprintf("%s (%s ago)", t.UTC().Format(time.RFC3339), age(t)))
	}
	if meta.Generation > 0 {
		field("Generation", fmt.Sprint(meta.Generation))
	}
	if spec, ok := parts["spec"]; ok {
		if err := yamlSection(&b, "Spec", spec); err != nil {
			return "", err
		}
	}
	if res.Kind == v1alpha1.KindProfile {
		if err := describeFilesystem(&b, parts["spec"]); err != nil {
			return "", err
		}
	}
	if len(status) > 0 {
		data, err := json.Marshal(status)
		if err != nil {
			return "", err
		}
		if err := yamlSection(&b, "Status", data); err != nil {
			return "", err
		}
	}
	if admission != nil {
		describeAdmission(&b, admission)
	}

	if len(conds) == 0 {
		field("Conditions", "<none>")
	} else {
		b.WriteString("Conditions:\n")
		rows := make([][]string, len(conds))
		for i, c := range conds {
			rows[i] = []string{c.Type, string(c.Status), c.Reason, firstLine(c.Message), age(c.LastTransitionTime)}
		}
		newTable("TYPE", "STATUS", "REASON", "MESSAGE", "AGE").write(&b, "  ", rows)
	}

	if len(events) == 0 {
		field("Events", "<none>")
	} else {
		events = events[max(0, len(events)-describeEvents):]
		b.WriteString("Events:\n")
		rows := make([][]string, len(events))
		for i, e := range events {
			rows[i] = []string{string(e.Type), e.Reason, seen(e.Count, e.FirstSeen, e.LastSeen), firstLine(e.Message)}
		}
		newTable("TYPE", "REASON", "AGE", "MESSAGE").write(&b, "  ", rows)
	}
	return b.String(), nil
}

// notReadyWhy says what the admission authority's reasons for not
// deciding mean to the person reading describe.
var notReadyWhy = map[string]string{
	"journal_full":    "the state disk is full, so launches that need admission are refused; free space and the next launch tries again",
	"journal_failed":  "a journal write failed, so launches that need admission are refused; the next launch tries again (marshald's log has the cause)",
	"journal_unknown": "a journal commit's outcome is unknown, so every launch that needs admission is refused until marshald is restarted",
}

// describeAdmission writes a Host's admission: whether the authority
// decides, the pressure level and why, and each resource's capacity,
// target, committed and free amounts.
func describeAdmission(b *strings.Builder, a *v1alpha1.AdmissionStatus) {
	b.WriteString("Admission:\n")
	ready := "True"
	if !a.Ready {
		ready = "False (" + orDash(a.NotReady)
		if !a.NotReadySince.IsZero() {
			ready += " since " + age(a.NotReadySince)
		}
		ready += ")"
		if why := notReadyWhy[a.NotReady]; why != "" {
			ready += ": " + why
		}
	}
	fmt.Fprintf(b, "  %-10s%s\n", "Ready:", ready)
	pressure := orDash(a.Pressure)
	if !a.PressureSince.IsZero() {
		pressure += " since " + age(a.PressureSince)
	}
	if a.PressureMessage != "" {
		pressure += ": " + a.PressureMessage
	}
	fmt.Fprintf(b, "  %-10s%s\n", "Pressure:", pressure)
	if r := a.Reserved; r != (v1alpha1.Amounts{}) {
		fmt.Fprintf(b, "  %-10scpu %s, memory %s, tasks %d, for the consumers' control\n", "Reserved:",
			cpu(r.CPUMilli), bytesIEC(r.MemoryBytes), r.Tasks)
	}
	newTable("RESOURCE", "CAPACITY", "TARGET", "COMMITTED", "FREE").write(b, "  ", [][]string{
		{"cpu", cpu(a.Capacity.CPUMilli), cpu(a.Target.CPUMilli), cpu(a.Committed.CPUMilli), cpu(a.Free.CPUMilli)},
		{"memory", bytesIEC(a.Capacity.MemoryBytes), bytesIEC(a.Target.MemoryBytes), bytesIEC(a.Committed.MemoryBytes), bytesIEC(a.Free.MemoryBytes)},
		{"tasks", fmt.Sprint(a.Capacity.Tasks), fmt.Sprint(a.Target.Tasks), fmt.Sprint(a.Committed.Tasks), fmt.Sprint(a.Free.Tasks)},
	})
}

// yamlSection writes "Title:" and the JSON value data as YAML indented
// under it.
func yamlSection(b *strings.Builder, title string, data json.RawMessage) error {
	y, err := jsonToYAML(data)
	if err != nil {
		return fmt.Errorf("%s: %w", title, err)
	}
	b.WriteString(title + ":\n")
	for _, line := range strings.Split(strings.TrimSuffix(string(y), "\n"), "\n") {
		b.WriteString("  " + line + "\n")
	}
	return nil
}

// labels writes labels as k=v, one a line, aligned under the first.
func labels(l map[string]string) string {
	if len(l) == 0 {
		return "<none>"
	}
	keys := slices.Sorted(maps.Keys(l))
	lines := make([]string, len(keys))
	for i, k := range keys {
		lines[i] = k + "=" + l[k]
	}
	return strings.Join(lines, "\n"+strings.Repeat(" ", 12))
}

// describeFilesystem writes a profile's effective filesystem rules, each
// with its origin (a default, or the declared rule that sets it), when
// it declares spec.filesystem.
func describeFilesystem(b *strings.Builder, spec json.RawMessage) error {
	var s v1alpha1.ProfileSpec
	if len(spec) == 0 {
		return nil
	}
	if err := json.Unmarshal(spec, &s); err != nil {
		return fmt.Errorf("reading Profile spec: %w", err)
	}
	if s.Filesystem == nil {
		return nil
	}
	fmt.Fprintf(b, "Filesystem: default %s; the most specific path decides\n", orDash(string(s.Filesystem.Default)))
	rules := s.Filesystem.Effective()
	rows := make([][]string, 0, len(rules)+1)
	for _, r := range rules {
		rows = append(rows, []string{string(r.Access), r.Path.String(), r.Origin})
	}
	rows = append(rows, []string{string(v1alpha1.FileNone), "marshald's config dir, state dir and sockets", "added at launch unless a rule names them"})
	newTable("ACCESS", "PATH", "ORIGIN").write(b, "  ", rows)
	return nil
}
