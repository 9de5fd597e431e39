package fleet

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/marshal-dev/marshal/api/loader"
	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/intake"
	"github.com/marshal-dev/marshal/reconcile"
)

// list is the store one kind's reflector keeps: it loads each object as
// a file would be loaded and declares it through the kind's feed. A list
// (Replace) arrives whole, so an emptying is seen as one.
//
// The reflector calls it from one goroutine: sums needs no lock.
type list struct {
	src  *Source
	kind string
	gvr  schema.GroupVersionResource
	feed *intake.Feed
	// sums are the loaded form of each unit, to skip an update that
	// changed nothing marshal reads (a status, a resourceVersion).
	sums map[string][sha256.Size]byte
	// listed is set once a list (or the API's answer that it does not
	// serve the kind) has come.
	listed atomic.Bool
}

var _ cache.ReflectorStore = (*list)(nil)

// unit is the name an object of kind goes by in declarations and
// messages, after kubectl's KIND/NAME.
func unit(kind, name string) string { return strings.ToLower(kind) + "/" + name }

func (l *list) Add(obj any) error    { return l.update(obj) }
func (l *list) Update(obj any) error { return l.update(obj) }

func (l *list) update(obj any) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("%s: unexpected %T", l.gvr.Resource, obj)
	}
	l.src.reached()
	name, sum, decl := load(l.kind, u)
	l.src.noteUID(reconcile.Key{Kind: l.kind, Name: u.GetName()}, string(u.GetUID()))
	if old, ok := l.sums[name]; ok && old == sum {
		return nil
	}
	l.sums[name] = sum
	l.feed.Declare(map[string]*intake.Unit{name: decl}, false)
	return nil
}

// Delete carries out a deletion someone made, even of the last object.
func (l *list) Delete(obj any) error {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("%s: unexpected %T", l.gvr.Resource, obj)
	}
	l.src.reached()
	name := unit(l.kind, u.GetName())
	l.src.noteUID(reconcile.Key{Kind: l.kind, Name: u.GetName()}, "")
	delete(l.sums, name)
	l.feed.Declare(map[string]*intake.Unit{name: nil}, false)
	return nil
}

// Replace takes a whole list: what changed is declared, what is missing
// is gone, and a list that leaves nothing of what was there is held.
func (l *list) Replace(items []any, _ string) error {
	l.src.reached()
	changed := map[string]*intake.Unit{}
	seen := make(map[string]bool, len(items))
	for _, obj := range items {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return fmt.Errorf("%s: unexpected %T", l.gvr.Resource, obj)
		}
		name, sum, decl := load(l.kind, u)
		seen[name] = true
		l.src.noteUID(reconcile.Key{Kind: l.kind, Name: u.GetName()}, string(u.GetUID()))
		if old, ok := l.sums[name]; ok && old == sum {
			continue
		}
		l.sums[name] = sum
		changed[name] = decl
	}
	for name := range l.sums {
		if !seen[name] {
			delete(l.sums, name)
			changed[name] = nil
		}
	}
	l.feed.Declare(changed, true)
	if !l.listed.Swap(true) {
		l.src.listedOne()
	}
	return nil
}

// Resync has nothing to do: nothing is cached but the sums.
func (l *list) Resync() error { return nil }

// restore declares the kind's last good objects from an earlier run and
// notes their units, so that a first list that lacks them removes them
// (or holds the emptying).
func (l *list) restore() (int, error) {
	restored, err := l.feed.Restore()
	if err != nil {
		return 0, err
	}
	for name := range restored {
		l.sums[name] = [sha256.Size]byte{}
	}
	return l.feed.Status().Objects, nil
}

// load loads an object of the API as marshal loads a file: strictly, and
// validated, so that what the CRD's schema lets through and marshal does
// not fails here too. Only what a manifest may declare is loaded: the
// name and labels of its metadata (the rest is the API server's) and
// every other field but status.
func load(kind string, u *unstructured.Unstructured) (name string, sum [sha256.Size]byte, decl *intake.Unit) {
	name = unit(kind, u.GetName())
	doc := make(map[string]any, len(u.Object))
	for k, v := range u.Object {
		if k != "metadata" && k != "status" {
			doc[k] = v
		}
	}
	meta := map[string]any{"name": u.GetName()}
	if labels := u.GetLabels(); len(labels) > 0 {
		meta["labels"] = labels
	}
	doc["metadata"] = meta
	data, err := json.Marshal(doc)
	if err != nil {
		return name, sum, &intake.Unit{Errors: []*loader.Error{{File: name, Kind: kind, Name: u.GetName(), Message: err.Error()}}}
	}
	sum = sha256.Sum256(data)
	f := loader.LoadBytes(name+".json", data)
	decl = &intake.Unit{Objects: f.Objects, Errors: f.Errors}
	// An object of the API has no file and no lines.
	for i := range decl.Objects {
		decl.Objects[i].File, decl.Objects[i].Line = name, 0
	}
	for _, e := range decl.Errors {
		e.File, e.Line = name, 0
	}
	if len(decl.Objects) == 1 && decl.Objects[0].GetTypeMeta().Kind != kind {
		decl = &intake.Unit{Errors: []*loader.Error{{File: name, Kind: kind, Name: u.GetName(),
			Message: fmt.Sprintf("kind %s listed as %s", decl.Objects[0].GetTypeMeta().Kind, kind)}}}
	}
	return name, sum, decl
}

// kindsWatched are the kinds a host takes from the API, and their
// resources.
var kindsWatched = []struct{ kind, resource string }{
	{v1alpha1.KindProfile, "profiles"},
	{v1alpha1.KindWorkspace, "workspaces"},
	{v1alpha1.KindConsumer, "consumers"},
	{v1alpha1.KindHost, "hosts"},
}
