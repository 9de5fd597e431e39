package applier

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/marshal-dev/marshal/api/loader"
	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/localapi"
	"github.com/marshal-dev/marshal/reconcile"
)

// AppliedDir is the directory, inside the config dir, that holds the
// files apply writes.
const AppliedDir = "applied"

// Declarations is what the config dir declares now (the daemon adapts the
// manifest source to it).
type Declarations interface {
	// Lookup returns the file (relative to the config dir) that declares
	// key and its object, if any.
	Lookup(key reconcile.Key) (file string, obj v1alpha1.Object, ok bool)
	// KeysIn returns the keys that file declares.
	KeysIn(file string) []reconcile.Key
}

// KindLister is implemented by Declarations that can list the declared
// keys of one kind. Apply uses it to refuse a second Host, since at most
// one may be declared; without it that check is left to the manifest
// source, which reports the conflict.
type KindLister interface {
	Keys(kind string) []reconcile.Key
}

// AppliedFile returns the file, relative to the config dir, that apply
// writes for the object: applied/<kind-lowercase>-<name>.yaml.
func AppliedFile(kind, name string) string {
	return filepath.Join(AppliedDir, strings.ToLower(kind)+"-"+name+".yaml")
}

// Apply declares the objects of req.Files in the config dir dir. Every
// file is loaded strictly, and the files are merged so that an object
// declared twice in the request is caught; any error means nothing is
// written and the errors are returned in the result. Then, per object:
//
//   - not declared: created, written to AppliedFile;
//   - declared in its AppliedFile: configured, or unchanged (and not
//     rewritten) when its defaulted spec and labels are equal;
//   - declared in any other file: refused, with a reason that says which
//     file and what to do.
//
// With req.DryRun the outcomes are the same and nothing is written. The
// error is for failures of the file system or ctx; outcomes up to the
// failure are in the result.
func Apply(ctx context.Context, dir string, decl Declarations, req localapi.ApplyRequest) (localapi.ApplyResult, error) {
	res := localapi.ApplyResult{Outcomes: []localapi.Outcome{}, DryRun: req.DryRun}
	objs, errs := loadRequest(req.Files)
	if len(errs) > 0 {
		res.Errors = errs
		return res, nil
	}
	if len(objs) == 0 {
		if len(req.Files) > 0 {
			res.Errors = []localapi.ManifestError{{File: fileNames(req.Files), Message: "no objects to apply: the files declare none"}}
		}
		return res, nil
	}
	if err := checkConfigDir(dir); err != nil {
		return res, err
	}
	for _, o := range objs {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		p, err := plan(dir, decl, o.Object)
		if err != nil {
			return res, err
		}
		if p.data != nil && !req.DryRun {
			if err := writeAtomic(dir, p.out.File, p.data); err != nil {
				return res, fmt.Errorf("applying %s %q: %w", p.out.Kind, p.out.Name, err)
			}
		}
		res.Outcomes = append(res.Outcomes, p.out)
	}
	return res, nil
}

// loadRequest loads the request's files strictly, in request order, and
// returns their objects, or every error, conflicts between them included.
func loadRequest(files []localapi.ApplyFile) ([]loader.Object, []localapi.ManifestError) {
	loaded := make([]loader.File, len(files))
	for i, f := range files {
		loaded[i] = loader.LoadInput(f.Name, f.Data)
	}
	if merged := loader.Merge(loaded); len(merged.Errors) > 0 {
		return nil, manifestErrors(merged.Errors)
	}
	var objs []loader.Object
	for _, f := range loaded {
		objs = append(objs, f.Objects...)
	}
	return objs, nil
}

func manifestErrors(errs []*loader.Error) []localapi.ManifestError {
	out := make([]localapi.ManifestError, len(errs))
	for i, e := range errs {
		out[i] = localapi.ManifestError{File: e.File, Line: e.Line, Kind: e.Kind, Name: e.Name, Field: e.Field, Message: e.Message}
	}
	return out
}

func fileNames(files []localapi.ApplyFile) string {
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

// planned is what apply does to one object: the outcome, and the file's
// new content when it is written.
type planned struct {
	out  localapi.Outcome
	data []byte
}

func plan(dir string, decl Declarations, obj v1alpha1.Object) (planned, error) {
	kind, name := obj.GetTypeMeta().Kind, obj.GetObjectMeta().Name
	key := reconcile.Key{Kind: kind, Name: name}
	target := AppliedFile(kind, name)
	out := localapi.Outcome{Kind: kind, Name: name, File: target}
	refuse := func(file, format string, args ...any) (planned, error) {
		out.Action, out.File, out.Reason = localapi.ActionRefused, file, fmt.Sprintf(format, args...)
		return planned{out: out}, nil
	}

	if file, _, ok := decl.Lookup(key); ok && filepath.Clean(file) != target {
		return refuse(file, "declared in %s; edit that file, or delete the object there first", file)
	}
	if kind == v1alpha1.KindHost {
		if other, file, ok := otherHost(decl, name); ok {
			return refuse(file, "only one Host may be declared, and Host %q is declared in %s; "+
				"edit that file, or delete that Host first", other, file)
		}
	}
	// The file on disk is the truth about the target: the declarations
	// may not have caught up with the last apply yet.
	current, err := loadTarget(dir, target)
	if err != nil {
		return planned{}, err
	}
	if others := otherKeys(key, decl.KeysIn(target), current); len(others) > 0 {
		return refuse(target, "%s also declares %s, so it is not a file marshalctl apply wrote; edit it by hand",
			target, strings.Join(others, ", "))
	}
	if current != nil && len(current.Errors) == 0 && len(current.Objects) == 1 {
		same, err := sameDeclaration(current.Objects[0].Object, obj)
		if err != nil {
			return planned{}, err
		}
		if same {
			out.Action = localapi.ActionUnchanged
			return planned{out: out}, nil
		}
	}
	data, err := render(obj)
	if err != nil {
		return planned{}, err
	}
	out.Action = localapi.ActionConfigured
	if current == nil {
		out.Action = localapi.ActionCreated
	}
	return planned{out: out, data: data}, nil
}

// otherHost returns a Host other than name that decl declares, and its
// file.
func otherHost(decl Declarations, name string) (other, file string, ok bool) {
	kl, isLister := decl.(KindLister)
	if !isLister {
		return "", "", false
	}
	for _, k := range kl.Keys(v1alpha1.KindHost) {
		if k.Name == name {
			continue
		}
		if f, _, declared := decl.Lookup(k); declared {
			return k.Name, f, true
		}
	}
	return "", "", false
}

// loadTarget loads the file at rel inside dir, or returns nil when there
// is none.
func loadTarget(dir, rel string) (*loader.File, error) {
	data, err := readFile(dir, rel, loader.MaxFileSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("reading %s: %w", rel, err)
	}
	f := loader.LoadBytes(filepath.Join(dir, rel), data)
	return &f, nil
}

// otherKeys lists, as Kind/name, the objects other than key that the
// declarations or the file on disk place in the target file.
func otherKeys(key reconcile.Key, declared []reconcile.Key, onDisk *loader.File) []string {
	seen := map[reconcile.Key]bool{key: true}
	var others []string
	add := func(k reconcile.Key) {
		if !seen[k] {
			seen[k] = true
			others = append(others, k.String())
		}
	}
	for _, k := range declared {
		add(k)
	}
	if onDisk != nil {
		for _, o := range onDisk.Objects {
			add(reconcile.Key{Kind: o.GetTypeMeta().Kind, Name: o.GetObjectMeta().Name})
		}
	}
	slices.Sort(others)
	return others
}

// sameDeclaration reports whether a and b declare the same object alike:
// same kind and name, and equal defaulted spec and labels.
func sameDeclaration(a, b v1alpha1.Object) (bool, error) {
	if a.GetTypeMeta().Kind != b.GetTypeMeta().Kind || a.GetObjectMeta().Name != b.GetObjectMeta().Name {
		return false, nil
	}
	ja, err := specAndLabels(a)
	if err != nil {
		return false, err
	}
	jb, err := specAndLabels(b)
	if err != nil {
		return false, err
	}
	return bytes.Equal(ja, jb), nil
}

// specAndLabels is the JSON of what a person declares about obj: its
// labels and its spec, as defaulted.
func specAndLabels(obj v1alpha1.Object) ([]byte, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding %s %q: %w", obj.GetTypeMeta().Kind, obj.GetObjectMeta().Name, err)
	}
	var parts struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(data, &parts); err != nil {
		return nil, err
	}
	return json.Marshal(struct {
		Labels map[string]string `json:"labels,omitempty"`
		Spec   json.RawMessage   `json:"spec"`
	}{obj.GetObjectMeta().Labels, parts.Spec})
}

// render is the file apply writes for obj: a header, then the defaulted
// object as YAML without status, generation or creationTimestamp.
func render(obj v1alpha1.Object) ([]byte, error) {
	kind, name := obj.GetTypeMeta().Kind, obj.GetObjectMeta().Name
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding %s %q: %w", kind, name, err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, err
	}
	delete(top, "status")
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(top["metadata"], &meta); err != nil {
		return nil, err
	}
	delete(meta, "generation")
	delete(meta, "creationTimestamp")
	if top["metadata"], err = json.Marshal(meta); err != nil {
		return nil, err
	}
	if data, err = json.Marshal(top); err != nil {
		return nil, err
	}
	y, err := yaml.JSONToYAML(data)
	if err != nil {
		return nil, fmt.Errorf("encoding %s %q as YAML: %w", kind, name, err)
	}
	header := fmt.Sprintf("# Written by marshalctl apply. Apply again to change it;\n"+
		"# `marshalctl delete %s %s` removes it.\n", strings.ToLower(kind), name)
	return append([]byte(header), y...), nil
}

// checkConfigDir returns nil when dir is an existing directory.
func checkConfigDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("config dir %s: %w; create it, or start marshald with the right --config-dir", dir, ErrNoConfigDir)
	case err != nil:
		return fmt.Errorf("config dir %s: %w", dir, err)
	case !fi.IsDir():
		return fmt.Errorf("config dir %s is not a directory: %w", dir, ErrNoConfigDir)
	}
	return nil
}
