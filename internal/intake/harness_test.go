package intake

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/reconcile"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is the sink of the tests: it keeps what was declared.
type recorder struct {
	mu   sync.Mutex
	decl map[reconcile.Key]*Declaration
}

func newRecorder() *recorder { return &recorder{decl: map[reconcile.Key]*Declaration{}} }

func (r *recorder) Declare(changes []Change) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range changes {
		if c.Declaration == nil {
			delete(r.decl, c.Key)
		} else {
			r.decl[c.Key] = c.Declaration
		}
	}
}

func (r *recorder) get(kind, name string) *Declaration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.decl[reconcile.Key{Kind: kind, Name: name}]
}

func (r *recorder) names() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for k := range r.decl {
		out = append(out, k.String())
	}
	slices.Sort(out)
	return fmt.Sprint(out)
}

func profile(name string, cpu int) string {
	return fmt.Sprintf("apiVersion: marshal.dev/v1alpha1\nkind: Profile\nmetadata:\n  name: %s\nspec:\n  limits:\n    cpu_milli: %d\n", name, cpu)
}

func cpuOf(d *Declaration) int64 {
	if d == nil {
		return -1
	}
	p := d.Object.(*v1alpha1.Profile)
	if p.Spec.Limits == nil || p.Spec.Limits.CPUMilli == nil {
		return 0
	}
	return *p.Spec.Limits.CPUMilli
}
