package loader

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/marshal-dev/marshal/api/v1alpha1"
)

// Generators of valid objects, as written by a person: optional fields
// sometimes omitted, never defaulted, empty collections nil (omitted).

var (
	genName = rapid.StringMatching(`[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?`)
	// genText is any text a string field may hold: validation refuses
	// only NUL in the fields that take free text. DEL, C1 controls and U+FFFE,
	// U+FFFF are left out because sigs.k8s.io/yaml cannot encode them
	// (encoding/json writes them raw, and YAML forbids them raw).
	genText = rapid.StringOf(rapid.Rune().Filter(func(r rune) bool {
		return r != 0 && (r < 0x7f || r > 0x9f) && r != 0xfffe && r != 0xffff
	}))
)

func genPositive(t *rapid.T, label string) *int64 {
	if !rapid.Bool().Draw(t, label+"_set") {
		return nil
	}
	v := rapid.OneOf(rapid.Int64Range(1, 1<<20), rapid.Int64Range(1, 1<<63-1)).Draw(t, label)
	return &v
}

func genLabels(t *rapid.T) map[string]string {
	key := rapid.StringMatching(`([a-z0-9]([-a-z0-9]{0,6}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,6}[a-z0-9])?)?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?`)
	value := rapid.StringMatching(`([A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?)?`)
	m := rapid.MapOfN(key, value, 0, 4).Draw(t, "labels")
	if len(m) == 0 {
		return nil
	}
	return m
}

func genMeta(t *rapid.T) v1alpha1.ObjectMeta {
	return v1alpha1.ObjectMeta{Name: genName.Draw(t, "name"), Labels: genLabels(t)}
}

func genProfile(t *rapid.T) *v1alpha1.Profile {
	p := v1alpha1.New(v1alpha1.KindProfile).(*v1alpha1.Profile)
	p.Metadata = genMeta(t)
	p.Spec.Isolation = rapid.SampledFrom([]v1alpha1.Isolation{"", v1alpha1.IsolationCgroup, v1alpha1.IsolationNetns}).Draw(t, "isolation")
	p.Spec.Orphans = rapid.SampledFrom([]v1alpha1.OrphanPolicy{"", v1alpha1.OrphansKeep, v1alpha1.OrphansStop}).Draw(t, "orphans")
	if rapid.Bool().Draw(t, "limits") {
		p.Spec.Limits = &v1alpha1.Limits{
			CPUMilli: genPositive(t, "cpu_milli"), MemoryBytes: genPositive(t, "memory_bytes"), Tasks: genPositive(t, "tasks"),
		}
	}
	return p
}

func genWorkspace(t *rapid.T) *v1alpha1.Workspace {
	w := v1alpha1.New(v1alpha1.KindWorkspace).(*v1alpha1.Workspace)
	w.Metadata = genMeta(t)
	s := &w.Spec
	s.Root = "/" + genText.Draw(t, "root")
	s.Profile = genName.Draw(t, "profile")
	s.Network.Policy = rapid.SampledFrom([]v1alpha1.NetworkPolicy{"", v1alpha1.NetworkOpen}).Draw(t, "policy")
	if rapid.Bool().Draw(t, "allow_set") {
		allow := rapid.Bool().Draw(t, "allow")
		s.Exec.Allow = &allow
	}
	nonEmpty := genText.Filter(func(s string) bool { return s != "" })
	if argv0 := rapid.SliceOfN(nonEmpty, 0, 4).Draw(t, "argv0"); len(argv0) > 0 {
		s.Exec.Argv0 = argv0
	}
	envName := nonEmpty.Filter(func(s string) bool { return !strings.Contains(s, "=") })
	if env := rapid.MapOfN(envName, genText, 0, 4).Draw(t, "env"); len(env) > 0 {
		s.Exec.Env = env
	}
	s.Processes.MaxLive = genPositive(t, "max_live")
	if rapid.Bool().Draw(t, "resources") {
		r := &v1alpha1.ResourcesSpec{Participation: rapid.SampledFrom([]v1alpha1.Participation{
			v1alpha1.ParticipationRequired, v1alpha1.ParticipationOptional, v1alpha1.ParticipationNone,
		}).Draw(t, "participation")}
		if rapid.Bool().Draw(t, "request") {
			r.Request = &v1alpha1.ResourceRequest{
				CPUMilli: genPositive(t, "cpu_milli"), MemoryBytes: genPositive(t, "memory_bytes"), Tasks: genPositive(t, "tasks"),
			}
			if rapid.Bool().Draw(t, "minimum") {
				noCoop := []v1alpha1.Level{"", v1alpha1.LevelAccounted, v1alpha1.LevelKernel}
				r.Request.Minimum = &v1alpha1.MinimumLevels{
					CPU:    rapid.SampledFrom(append(noCoop, v1alpha1.LevelCooperative)).Draw(t, "cpu"),
					Memory: rapid.SampledFrom(noCoop).Draw(t, "memory"),
					PIDs:   rapid.SampledFrom(noCoop).Draw(t, "pids"),
				}
			}
		}
		s.Resources = r
	}
	return w
}

func genHost(t *rapid.T) *v1alpha1.Host {
	h := v1alpha1.New(v1alpha1.KindHost).(*v1alpha1.Host)
	h.Metadata = genMeta(t)
	if rapid.Bool().Draw(t, "capacity") {
		h.Spec.Capacity = &v1alpha1.Capacity{
			CPUMilli: genPositive(t, "cpu_milli"), MemoryBytes: genPositive(t, "memory_bytes"), Tasks: genPositive(t, "tasks"),
		}
	}
	if rapid.Bool().Draw(t, "prepared_ttl") {
		h.Spec.PreparedTTL = &v1alpha1.Duration{Duration: time.Duration(rapid.Int64Range(1, 1<<62).Draw(t, "ttl"))}
	}
	return h
}

var genObject = rapid.Custom(func(t *rapid.T) v1alpha1.Object {
	switch rapid.SampledFrom(v1alpha1.Kinds).Draw(t, "kind") {
	case v1alpha1.KindProfile:
		return genProfile(t)
	case v1alpha1.KindWorkspace:
		return genWorkspace(t)
	default:
		return genHost(t)
	}
})

// tb is what the helpers need of *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
}

// deepCopy copies o through JSON, which keeps every field of these types.
func deepCopy(t tb, o v1alpha1.Object) v1alpha1.Object {
	t.Helper()
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	c := v1alpha1.New(o.GetTypeMeta().Kind)
	if err := json.Unmarshal(b, c); err != nil {
		t.Fatal(err)
	}
	return c
}

// reload encodes objs with sigs.k8s.io/yaml as one multi-document file
// and loads it back.
func reload(t tb, path string, objs ...v1alpha1.Object) File {
	t.Helper()
	var docs []string
	for _, o := range objs {
		y, err := sigsyaml.Marshal(o)
		if err != nil {
			j, _ := json.Marshal(o)
			t.Fatal(fmt.Sprintf("encoding %q: %v", j, err))
		}
		docs = append(docs, string(y))
	}
	return LoadBytes(path, []byte(strings.Join(docs, "---\n")))
}

func TestRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		objs := rapid.SliceOfN(genObject, 1, 3).Draw(t, "objects")
		var want []v1alpha1.Object
		for _, o := range objs {
			if errs := o.Validate(); len(errs) > 0 {
				t.Fatalf("generated an invalid object: %v", errs)
			}
			d := deepCopy(t, o)
			d.Default()
			if errs := d.Validate(); len(errs) > 0 {
				t.Fatalf("defaulted object does not validate: %v", errs)
			}
			again := deepCopy(t, d)
			again.Default()
			if !reflect.DeepEqual(again, d) {
				t.Fatalf("Default is not idempotent:\n%#v\n%#v", d, again)
			}
			want = append(want, d)
		}
		// As written, and as defaulted: both load to the defaulted object.
		for _, in := range [][]v1alpha1.Object{objs, want} {
			f := reload(t, "rt.yaml", in...)
			if len(f.Errors) > 0 {
				y, _ := sigsyaml.Marshal(in[0])
				t.Fatalf("reload: %v\n%s", f.Errors, y)
			}
			if len(f.Objects) != len(want) {
				t.Fatalf("reload: %d objects, want %d", len(f.Objects), len(want))
			}
			for i, o := range f.Objects {
				if !reflect.DeepEqual(o.Object, want[i]) {
					got, _ := sigsyaml.Marshal(o.Object)
					exp, _ := sigsyaml.Marshal(want[i])
					t.Fatalf("object %d differs:\n--- got\n%s--- want\n%s", i, got, exp)
				}
			}
		}
		// JSON, one object per file.
		for i, o := range objs {
			b, err := json.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			f := LoadBytes("rt.json", b)
			if len(f.Errors) > 0 || len(f.Objects) != 1 || !reflect.DeepEqual(f.Objects[0].Object, want[i]) {
				t.Fatalf("json reload of %s: %v", b, f.Errors)
			}
		}
	})
}
