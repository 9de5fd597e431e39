package fleet

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/intake"
	"github.com/marshal-dev/marshal/reconcile"
)

// sink keeps what was declared.
type sink struct {
	mu       sync.Mutex
	declared map[reconcile.Key]*intake.Declaration
	wake     chan struct{}
}

func newSink() *sink {
	return &sink{declared: map[reconcile.Key]*intake.Declaration{}, wake: make(chan struct{}, 1)}
}

func (s *sink) Declare(changes []intake.Change) {
	s.mu.Lock()
	for _, c := range changes {
		if c.Declaration == nil {
			delete(s.declared, c.Key)
		} else {
			s.declared[c.Key] = c.Declaration
		}
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *sink) names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k := range s.declared {
		out = append(out, k.String())
	}
	slices.Sort(out)
	return out
}

func (s *sink) get(kind, name string) *intake.Declaration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.declared[reconcile.Key{Kind: kind, Name: name}]
}

// events keeps the reasons recorded, and what each was about.
type events struct {
	mu      sync.Mutex
	reasons []string
	about   []reconcile.Key
}

func (e *events) Normal(obj reconcile.Key, reason, message string)  { e.add(obj, reason) }
func (e *events) Warning(obj reconcile.Key, reason, message string) { e.add(obj, reason) }
func (e *events) add(obj reconcile.Key, reason string) {
	e.mu.Lock()
	e.reasons = append(e.reasons, reason)
	e.about = append(e.about, obj)
	e.mu.Unlock()
}

// apiProfile is a Profile as the API serves it: with the metadata and
// status the API server and marshald add.
func apiProfile(name string, cpu int64, spec ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.APIVersion, "kind": v1alpha1.KindProfile,
		"metadata": map[string]any{
			"name": name, "uid": "uid-" + name, "resourceVersion": "7", "generation": int64(3),
			"creationTimestamp": "2026-01-01T00:00:00Z", "annotations": map[string]any{"a": "b"},
			"managedFields": []any{map[string]any{"manager": "kubectl"}},
		},
		"spec":   map[string]any{"limits": map[string]any{"cpu_milli": cpu}},
		"status": map[string]any{"agents": int64(2), "conditions": []any{}},
	}}
	for _, kv := range spec {
		k, v, _ := strings.Cut(kv, "=")
		u.Object["spec"].(map[string]any)[k] = v
	}
	u.SetUID(types.UID("uid-" + name))
	return u
}

func newTestList(t *testing.T) (*list, *sink, *events) {
	t.Helper()
	sk, ev := newSink(), &events{}
	s := New(Options{HostName: "h", Sink: sk, Recorder: ev})
	return s.lists[0], sk, ev
}

func TestLoadTakesWhatAManifestDeclares(t *testing.T) {
	name, sum, u := load(v1alpha1.KindProfile, apiProfile("coder", 500))
	if name != "profile/coder" || len(u.Errors) > 0 || len(u.Objects) != 1 {
		t.Fatalf("load = %q, %v, want profile/coder with one object", name, u.Errors)
	}
	p := u.Objects[0].Object.(*v1alpha1.Profile)
	if *p.Spec.Limits.CPUMilli != 500 || p.Metadata.Generation != 0 || p.Status.Agents != 0 {
		t.Errorf("loaded %+v: want the spec, and neither the API's generation nor a status", p)
	}
	if u.Objects[0].File != "profile/coder" || u.Objects[0].Line != 0 {
		t.Errorf("declared at %s:%d, want profile/coder without a line", u.Objects[0].File, u.Objects[0].Line)
	}
	// What the API server changes (resourceVersion) or marshald writes
	// (status) leaves the loaded form as it was.
	other := apiProfile("coder", 500)
	other.SetResourceVersion("8")
	other.Object["status"] = map[string]any{"agents": int64(3)}
	if _, sum2, _ := load(v1alpha1.KindProfile, other); sum2 != sum {
		t.Error("a new resourceVersion or status changed the loaded form")
	}
}

func TestLoadIsAsStrictAsTheLoader(t *testing.T) {
	tests := []struct {
		name  string
		obj   *unstructured.Unstructured
		field string
	}{
		{"unknown_field", apiProfile("coder", 500, "limitz=1"), "spec.limitz"},
		{"invalid_value", apiProfile("coder", -5), "spec.limits.cpu_milli"},
		{"name_not_a_label", apiProfile("co.der", 500), "metadata.name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name, _, u := load(v1alpha1.KindProfile, tc.obj)
			if len(u.Objects) > 0 || len(u.Errors) == 0 {
				t.Fatalf("load(%s) = %d objects, %v; want an error", tc.name, len(u.Objects), u.Errors)
			}
			e := u.Errors[0]
			if e.File != name || e.Line != 0 || e.Field != tc.field {
				t.Errorf("error %q: want it at %s, field %s, without a line", e.Error(), name, tc.field)
			}
		})
	}
}

func TestListCarriesOutDeletionsAndHoldsAnEmptiedList(t *testing.T) {
	l, sk, ev := newTestList(t)
	a, b := apiProfile("a", 100), apiProfile("b", 200)
	if err := l.Replace([]any{a, b}, "1"); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(sk.names()); got != "[Profile/a Profile/b]" {
		t.Fatalf("after a list: %s", got)
	}
	// A bad version keeps the last good one, Invalid.
	l.Update(apiProfile("a", -1))
	if d := sk.get("Profile", "a"); d == nil || len(d.Invalid) == 0 || *d.Object.(*v1alpha1.Profile).Spec.Limits.CPUMilli != 100 {
		t.Fatalf("after a bad version: %+v, want the last good, invalid", d)
	}
	// A deletion through the watch is carried out, the last one too.
	l.Delete(a)
	l.Delete(cacheTombstone(b))
	if got := sk.names(); len(got) != 0 {
		t.Fatalf("after deletions: %q, want none", got)
	}
	// A list that comes back empty where objects were is held.
	l.Replace([]any{apiProfile("c", 300)}, "2")
	l.Replace(nil, "3")
	if got := fmt.Sprint(sk.names()); got != "[Profile/c]" {
		t.Fatalf("after an empty list: %s, want Profile/c held", got)
	}
	if !l.feed.Status().Held || !slices.Contains(ev.reasons, "EmptiedHeld") {
		t.Errorf("not held: %+v, events %q", l.feed.Status(), ev.reasons)
	}
	if !l.feed.ConfirmEmpty() || len(sk.names()) != 0 {
		t.Errorf("confirming the emptying left %q", sk.names())
	}
}

// An object that never loaded is told on itself, not on the API: it has
// no Invalid condition to say why it is not declared. An emptying is the
// list's, told on the API.
func TestListTellsAnObjectThatNeverLoadedOnItself(t *testing.T) {
	l, sk, ev := newTestList(t)
	if err := l.Replace([]any{apiProfile("good", 100), apiProfile("bad", -1)}, "1"); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(sk.names()); got != "[Profile/good]" {
		t.Fatalf("after a list: %s, want Profile/good only", got)
	}
	want := []string{"Invalid Profile/bad"}
	if got := ev.told(); !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
	l.Replace(nil, "2")
	want = append(want, "EmptiedHeld "+KindAPI+"/profiles")
	if got := ev.told(); !slices.Equal(got, want) {
		t.Errorf("after an emptying: events %q, want %q", got, want)
	}
}

// told returns each event recorded but the API's answering, as
// "REASON KIND/NAME".
func (e *events) told() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for i, r := range e.reasons {
		if r != "APIReachable" {
			out = append(out, r+" "+e.about[i].String())
		}
	}
	return out
}

func cacheTombstone(obj *unstructured.Unstructured) any {
	return cache.DeletedFinalStateUnknown{Key: obj.GetName(), Obj: obj}
}
