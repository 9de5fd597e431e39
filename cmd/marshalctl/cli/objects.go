package cli

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/localapi"
)

// view is how one resource looks in a table.
type view struct {
	// header returns the columns: wide adds some, extra adds the
	// optional column (a profile's INVALID, a workspace's REASON).
	header func(wide, extra bool) []string
	// cells returns an object's row under that header.
	cells func(obj json.RawMessage, wide, extra bool) ([]string, error)
	// extra reports whether obj fills the optional column; nil when the
	// view has none.
	extra func(obj json.RawMessage) (bool, error)
}

// views are the tables of every resource, by kind.
var views = map[string]view{
	v1alpha1.KindProfile:   {header: profileHeader, cells: profileCells, extra: profileExtra},
	v1alpha1.KindWorkspace: {header: workspaceHeader, cells: workspaceCells, extra: workspaceExtra},
	v1alpha1.KindHost:      {header: hostHeader, cells: hostCells},
	v1alpha1.KindConsumer:  {header: consumerHeader, cells: consumerCells, extra: consumerExtra},
	v1alpha1.KindAgent:     {header: agentHeader, cells: agentCells},
}

// table returns the table of items: the optional column is shown when
// any item fills it.
func (v view) table(items []json.RawMessage, wide bool) (t *table, rows [][]string, extra bool, err error) {
	if v.extra != nil {
		for _, item := range items {
			e, err := v.extra(item)
			if err != nil {
				return nil, nil, false, err
			}
			extra = extra || e
		}
	}
	rows = make([][]string, 0, len(items))
	for _, item := range items {
		r, err := v.cells(item, wide, extra)
		if err != nil {
			return nil, nil, false, err
		}
		rows = append(rows, r)
	}
	return newTable(v.header(wide, extra)...), rows, extra, nil
}

func decode[T any](data json.RawMessage) (*T, error) {
	v := new(T)
	if err := json.Unmarshal(data, v); err != nil {
		return nil, fmt.Errorf("reading an object from marshald: %w", err)
	}
	return v, nil
}

// condition returns the condition of type typ, or nil.
func condition(conds []v1alpha1.Condition, typ string) *v1alpha1.Condition {
	i := slices.IndexFunc(conds, func(c v1alpha1.Condition) bool { return c.Type == typ })
	if i < 0 {
		return nil
	}
	return &conds[i]
}

// ready is the Ready condition's status, Unknown when absent.
func ready(conds []v1alpha1.Condition) string {
	if c := condition(conds, v1alpha1.ConditionReady); c != nil {
		return string(c.Status)
	}
	return string(v1alpha1.ConditionUnknown)
}

// invalid is the first load error of an object whose manifest no longer
// loads, or "".
func invalid(conds []v1alpha1.Condition) string {
	c := condition(conds, v1alpha1.ConditionInvalid)
	if c == nil || c.Status != v1alpha1.ConditionTrue {
		return ""
	}
	return firstLine(cmp.Or(c.Message, c.Reason))
}

// notReady says why an object is not Ready, or "".
func notReady(conds []v1alpha1.Condition) string {
	c := condition(conds, v1alpha1.ConditionReady)
	if c == nil || c.Status == v1alpha1.ConditionTrue {
		return ""
	}
	return firstLine(cmp.Or(c.Message, c.Reason))
}

func profileHeader(wide, extra bool) []string {
	h := []string{"NAME", "READY", "AGENTS", "LIMITS"}
	if extra {
		h = append(h, "INVALID")
	}
	h = append(h, "AGE")
	if wide {
		h = append(h, "ISOLATION", "ORPHANS", "SLICE")
	}
	return h
}

func profileExtra(data json.RawMessage) (bool, error) {
	p, err := decode[v1alpha1.Profile](data)
	if err != nil {
		return false, err
	}
	return invalid(p.Status.Conditions) != "", nil
}

func profileCells(data json.RawMessage, wide, extra bool) ([]string, error) {
	p, err := decode[v1alpha1.Profile](data)
	if err != nil {
		return nil, err
	}
	r := []string{p.Metadata.Name, ready(p.Status.Conditions), fmt.Sprint(p.Status.Agents), limits(p.Spec.Limits)}
	if extra {
		r = append(r, invalid(p.Status.Conditions))
	}
	r = append(r, age(p.Metadata.CreationTimestamp))
	if wide {
		r = append(r, string(p.Spec.Isolation), string(p.Spec.Orphans), orDash(p.Status.Slice))
	}
	return r, nil
}

func limits(l *v1alpha1.Limits) string {
	if l == nil {
		return "-"
	}
	var parts []string
	if l.CPUMilli != nil {
		parts = append(parts, "cpu="+cpu(*l.CPUMilli))
	}
	if l.MemoryBytes != nil {
		parts = append(parts, "memory="+bytesIEC(*l.MemoryBytes))
	}
	if l.Tasks != nil {
		parts = append(parts, fmt.Sprintf("tasks=%d", *l.Tasks))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}

func workspaceHeader(wide, extra bool) []string {
	h := []string{"NAME", "PROFILE", "READY", "LIVE", "MAX", "PARTICIPATION", "AGE"}
	if wide {
		h = append(h, "RESERVED", "ROOT")
	}
	if extra {
		h = append(h, "REASON")
	}
	return h
}

func workspaceExtra(data json.RawMessage) (bool, error) {
	w, err := decode[v1alpha1.Workspace](data)
	if err != nil {
		return false, err
	}
	return notReady(w.Status.Conditions) != "", nil
}

func workspaceCells(data json.RawMessage, wide, extra bool) ([]string, error) {
	w, err := decode[v1alpha1.Workspace](data)
	if err != nil {
		return nil, err
	}
	maxLive, participation := "-", string(v1alpha1.ParticipationNone)
	if w.Spec.Processes.MaxLive != nil {
		maxLive = fmt.Sprint(*w.Spec.Processes.MaxLive)
	}
	if w.Spec.Resources != nil {
		participation = string(w.Spec.Resources.Participation)
	}
	r := []string{w.Metadata.Name, w.Spec.Profile, ready(w.Status.Conditions), fmt.Sprint(w.Status.Live),
		maxLive, participation, age(w.Metadata.CreationTimestamp)}
	if wide {
		r = append(r, fmt.Sprint(w.Status.Reserved), w.Spec.Root)
	}
	if extra {
		r = append(r, notReady(w.Status.Conditions))
	}
	return r, nil
}

func consumerHeader(wide, extra bool) []string {
	h := []string{"NAME", "CONSUMER-ID", "ROLE", "GENERATION", "READY", "MAX", "AGE"}
	if wide {
		h = append(h, "RESERVATION")
	}
	if extra {
		h = append(h, "REASON")
	}
	return h
}

func consumerExtra(data json.RawMessage) (bool, error) {
	c, err := decode[v1alpha1.Consumer](data)
	if err != nil {
		return false, err
	}
	return notReady(c.Status.Conditions) != "", nil
}

func consumerCells(data json.RawMessage, wide, extra bool) ([]string, error) {
	c, err := decode[v1alpha1.Consumer](data)
	if err != nil {
		return nil, err
	}
	maxInstances := "-"
	if c.Spec.MaxInstances != nil {
		maxInstances = fmt.Sprint(*c.Spec.MaxInstances)
	}
	r := []string{c.Metadata.Name, orDash(c.Status.ConsumerID), string(c.Spec.Role), c.Spec.Generation,
		ready(c.Status.Conditions), maxInstances, age(c.Metadata.CreationTimestamp)}
	if wide {
		reservation := "-"
		if res := c.Spec.ControlReservation; res != nil && res.CPUMilli != nil && res.MemoryBytes != nil && res.Tasks != nil &&
			(*res.CPUMilli > 0 || *res.MemoryBytes > 0 || *res.Tasks > 0) {
			reservation = fmt.Sprintf("cpu=%s,memory=%s,tasks=%d", cpu(*res.CPUMilli), bytesIEC(*res.MemoryBytes), *res.Tasks)
		}
		r = append(r, reservation)
	}
	if extra {
		r = append(r, notReady(c.Status.Conditions))
	}
	return r, nil
}

func hostHeader(wide, _ bool) []string {
	h := []string{"NAME", "CPU", "MEMORY", "TASKS", "BACKEND", "AGE"}
	if wide {
		h = append(h, "PRESSURE", "TARGET", "ENFORCEMENT")
	}
	return h
}

func hostCells(data json.RawMessage, wide, _ bool) ([]string, error) {
	h, err := decode[v1alpha1.Host](data)
	if err != nil {
		return nil, err
	}
	c := h.Status.Capacity
	r := []string{h.Metadata.Name, amount(c.CPUMilli, cpu), amount(c.MemoryBytes, bytesIEC),
		amount(c.Tasks, func(n int64) string { return fmt.Sprint(n) }), orDash(h.Status.Backend), age(h.Metadata.CreationTimestamp)}
	if wide {
		pressure, target := "-", "-"
		if a := h.Status.Admission; a != nil {
			pressure, target = pressureCell(a), targetCell(a)
		}
		r = append(r, pressure, target, enforcement(h.Status.Enforcement))
	}
	return r, nil
}

// pressureCell is the level and, unless it is normal, why and for how
// long: "constrained (cpu pressure, 12s)".
func pressureCell(a *v1alpha1.AdmissionStatus) string {
	if a.Pressure == "" || a.Pressure == "normal" || a.PressureMessage == "" {
		return orDash(a.Pressure)
	}
	return fmt.Sprintf("%s (%s, %s)", a.Pressure, a.PressureMessage, age(a.PressureSince))
}

// targetCell is the admission target of each resource against the work
// capacity: "cpu=750m/1500m,memory=4GiB/8GiB,tasks=2048/4096".
func targetCell(a *v1alpha1.AdmissionStatus) string {
	return fmt.Sprintf("cpu=%s/%s,memory=%s/%s,tasks=%d/%d",
		cpu(a.Target.CPUMilli), cpu(a.Capacity.CPUMilli),
		bytesIEC(a.Target.MemoryBytes), bytesIEC(a.Capacity.MemoryBytes),
		a.Target.Tasks, a.Capacity.Tasks)
}

func amount(n int64, format func(int64) string) string {
	if n == 0 {
		return "-"
	}
	return format(n)
}

func enforcement(es []v1alpha1.Enforcement) string {
	if len(es) == 0 {
		return "-"
	}
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Resource + "=" + string(e.Level)
	}
	return strings.Join(parts, ",")
}

func agentHeader(wide, _ bool) []string {
	h := []string{"SCOPE", "PROFILE", "WORKSPACE", "ATTEMPT", "ORIGIN", "PIDS", "CPU", "MEMORY", "AGE"}
	if wide {
		h = append(h, "PATH")
	}
	return h
}

func agentCells(data json.RawMessage, wide, _ bool) ([]string, error) {
	a, err := decode[v1alpha1.Agent](data)
	if err != nil {
		return nil, err
	}
	name, attempt := a.Metadata.Name, a.Status.Attempt
	if !wide {
		name, attempt = shortScope(name, a.Status.ID), shortID(attempt)
	}
	workspace := a.Status.Workspace
	if a.Status.Consumer != "" {
		// A consumer's launch helper runs in no workspace: who launched
		// it is said where the workspace is.
		workspace = "consumer:" + a.Status.Consumer
	}
	// A scope marshald did not launch is foreign: its name proves nothing.
	origin := "foreign"
	if a.Status.Launched {
		origin = "marshald"
	}
	r := []string{name, a.Status.Profile, orDash(workspace), orDash(attempt), origin,
		fmt.Sprint(a.Status.Usage.Tasks), cpuTime(a.Status.Usage.CPUUsec), bytesIEC(a.Status.Usage.MemoryBytes), age(a.Status.Since)}
	if wide {
		r = append(r, a.Status.Path)
	}
	return r, nil
}

// shortened marks where shortScope left digits out.
const shortened = "…"

// shortScope abbreviates the launch ID inside a scope name to its first
// eight digits. resolveAgent takes the result back.
func shortScope(name, id string) string {
	if len(id) <= 8 || !strings.Contains(name, id) {
		return name
	}
	return strings.Replace(name, id, id[:8]+shortened, 1)
}

func shortID(id string) string {
	if len(id) <= 8 {
		return id
	}
	return id[:8]
}

// cpuTime writes CPU time used: "1.2s", "3m4.5s".
func cpuTime(usec int64) string {
	d := time.Duration(usec) * time.Microsecond
	switch {
	case d == 0:
		return "0s"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Hour:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// resourceNames lists the resources for messages: "profiles (profile,
// prof, pr), …".
func resourceNames() string {
	parts := make([]string, len(localapi.Resources))
	for i, r := range localapi.Resources {
		parts[i] = r.Plural + " (" + strings.Join(r.Short, ", ") + ")"
	}
	return strings.Join(parts, ", ")
}
