package applier

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/marshal-dev/marshal/api/loader"
	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/localapi"
	"github.com/marshal-dev/marshal/reconcile"
)

// Delete stops declaring objects in the config dir dir: the object
// req.Kind/req.Name, every object of req.Kind whose declared labels
// match req.Selector (decl must be a KindLister), or every object
// req.Files declare (loaded as input,
// strictly otherwise; any error means nothing is removed and the errors
// are returned in the result). Delete removes only what Apply wrote, as
// Apply never touches a file it did not write: the config dir is often a
// git checkout, and a file someone wrote is theirs to change. Per object:
//
//   - declared in its AppliedFile, which declares nothing else the
//     request keeps: deleted, by removing that file;
//   - declared in any other file: refused, with a reason that names the
//     file to edit;
//   - declared in its AppliedFile with other objects (edited by hand):
//     refused the same way;
//   - not declared: not_found. The file on disk is the truth: an object
//     whose file is gone, or no longer declares it, is not found even
//     while the declarations have not caught up.
//
// With req.DryRun the outcomes are the same and nothing is removed. The
// error is for failures of the file system or ctx.
func Delete(ctx context.Context, dir string, decl Declarations, req localapi.DeleteRequest) (localapi.DeleteResult, error) {
	res := localapi.DeleteResult{Outcomes: []localapi.Outcome{}, DryRun: req.DryRun}
	keys, errs := deleteKeys(req, decl)
	if len(errs) > 0 {
		res.Errors = errs
		return res, nil
	}
	if err := checkConfigDir(dir); err != nil {
		return res, err
	}

	// Where each key is declared, and what each of those files declares.
	declaredIn := make([]string, len(keys))
	type fileKeys struct {
		declared map[reconcile.Key]bool
		asked    map[reconcile.Key]bool
	}
	files := map[string]*fileKeys{}
	for i, k := range keys {
		file, onDisk, err := locate(dir, decl, k)
		if err != nil {
			return res, err
		}
		if file == "" {
			continue
		}
		declaredIn[i] = file
		fk := files[file]
		if fk == nil {
			fk = &fileKeys{declared: map[reconcile.Key]bool{}, asked: map[reconcile.Key]bool{}}
			for _, dk := range decl.KeysIn(file) {
				fk.declared[dk] = true
			}
			if onDisk != nil {
				for _, o := range onDisk.Objects {
					fk.declared[keyOf(o.Object)] = true
				}
			}
			files[file] = fk
		}
		fk.asked[k] = true
		fk.declared[k] = true
	}

	removed := map[string]bool{}
	for i, k := range keys {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		out := localapi.Outcome{Kind: k.Kind, Name: k.Name}
		file := declaredIn[i]
		if file == "" {
			out.Action = localapi.ActionNotFound
			res.Outcomes = append(res.Outcomes, out)
			continue
		}
		out.File = file
		if file != AppliedFile(k.Kind, k.Name) {
			out.Action = localapi.ActionRefused
			out.Reason = fmt.Sprintf("declared in %s; remove it there", file)
			res.Outcomes = append(res.Outcomes, out)
			continue
		}
		fk := files[file]
		if others := len(fk.declared) - len(fk.asked); others > 0 {
			out.Action = localapi.ActionRefused
			out.Reason = fmt.Sprintf("declared with %s in %s; remove it from that file", plural(others, "other object"), file)
			res.Outcomes = append(res.Outcomes, out)
			continue
		}
		if !req.DryRun && !removed[file] {
			if err := removeFile(dir, file); err != nil {
				return res, fmt.Errorf("deleting %s %q: %w", k.Kind, k.Name, err)
			}
		}
		removed[file] = true
		out.Action = localapi.ActionDeleted
		res.Outcomes = append(res.Outcomes, out)
	}
	return res, nil
}

// deleteKeys returns the keys a delete request names, in order, without
// repeats, or what is wrong with the request.
func deleteKeys(req localapi.DeleteRequest, decl Declarations) ([]reconcile.Key, []localapi.ManifestError) {
	fail := func(format string, args ...any) ([]reconcile.Key, []localapi.ManifestError) {
		return nil, []localapi.ManifestError{{Kind: req.Kind, Name: req.Name, Message: fmt.Sprintf(format, args...)}}
	}
	switch {
	case len(req.Files) > 0 && (req.Kind != "" || req.Name != "" || req.Selector != ""):
		return fail("give a kind and a name, a kind and a selector, or files, not more")
	case req.Selector != "" && req.Name != "":
		return fail("give a kind and a name, or a kind and a selector, not both")
	case len(req.Files) > 0:
		var keys []reconcile.Key
		seen := map[reconcile.Key]bool{}
		var errs []*loader.Error
		for _, f := range req.Files {
			lf := loader.LoadInput(f.Name, f.Data)
			errs = append(errs, lf.Errors...)
			for _, o := range lf.Objects {
				if k := keyOf(o.Object); !seen[k] {
					seen[k] = true
					keys = append(keys, k)
				}
			}
		}
		if len(errs) > 0 {
			return nil, manifestErrors(errs)
		}
		if len(keys) == 0 {
			return nil, []localapi.ManifestError{{File: fileNames(req.Files), Message: "no objects to delete: the files declare none"}}
		}
		return keys, nil
	case req.Kind == "" || (req.Name == "" && req.Selector == ""):
		return fail("nothing to delete: give a kind and a name, a kind and a selector, or files")
	}
	kind, ok := declaredKind(req.Kind)
	switch {
	case !ok && strings.EqualFold(req.Kind, v1alpha1.KindAgent):
		return fail("agents are not declared, so they cannot be deleted; an agent ends when its processes exit " +
			"(marshalctl stop agent ends it)")
	case !ok:
		return fail("unknown kind %q; declared kinds are %s", req.Kind, strings.Join(v1alpha1.Kinds, ", "))
	}
	if req.Selector != "" {
		return selectedKeys(kind, req.Selector, decl)
	}
	if msgs := v1alpha1.ValidateName(req.Name); len(msgs) > 0 {
		return fail("invalid name %q: %s", req.Name, strings.Join(msgs, "; "))
	}
	return []reconcile.Key{{Kind: kind, Name: req.Name}}, nil
}

// selectedKeys returns the declared keys of kind whose labels match
// selector, sorted by name.
func selectedKeys(kind, selector string, decl Declarations) ([]reconcile.Key, []localapi.ManifestError) {
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, []localapi.ManifestError{{Kind: kind, Message: fmt.Sprintf("label selector %q: %v", selector, err)}}
	}
	kl, ok := decl.(KindLister)
	if !ok {
		return nil, []localapi.ManifestError{{Kind: kind, Message: "deleting by label selector is not supported here"}}
	}
	var keys []reconcile.Key
	for _, k := range kl.Keys(kind) {
		if _, obj, ok := decl.Lookup(k); ok && sel.Matches(labels.Set(obj.GetObjectMeta().Labels)) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b reconcile.Key) int { return strings.Compare(a.Name, b.Name) })
	return keys, nil
}

// declaredKind returns the kind, as the API spells it, that manifests may
// declare and kind names ignoring case.
func declaredKind(kind string) (string, bool) {
	for _, k := range v1alpha1.Kinds {
		if strings.EqualFold(k, kind) {
			return k, true
		}
	}
	return "", false
}

// locate returns the file that declares key, as loaded from disk: the
// declarations' answer, else its applied file (an apply the
// declarations have not caught up with). The file on disk decides: one
// that is gone, or that loads and does not declare key, means key is not
// declared (a removal or an edit not caught up with yet), and it returns
// "". A declared file that fails to load keeps its last good objects, so
// key is declared there still. A file other than key's applied file is
// returned as declared, unread: Delete refuses to touch it anyway.
func locate(dir string, decl Declarations, key reconcile.Key) (string, *loader.File, error) {
	file, declared := AppliedFile(key.Kind, key.Name), false
	if f, _, ok := decl.Lookup(key); ok {
		if !filepath.IsLocal(f) {
			return "", nil, fmt.Errorf("%s is declared in %q: %w", key, f, ErrOutsideDir)
		}
		if filepath.Clean(f) != file {
			return filepath.Clean(f), nil, nil
		}
		declared = true
	}
	onDisk, err := loadTarget(dir, file)
	if err != nil || onDisk == nil {
		return "", nil, err
	}
	if declared && len(onDisk.Errors) > 0 {
		return file, onDisk, nil
	}
	for _, o := range onDisk.Objects {
		if keyOf(o.Object) == key {
			return file, onDisk, nil
		}
	}
	return "", nil, nil
}

func keyOf(obj v1alpha1.Object) reconcile.Key {
	return reconcile.Key{Kind: obj.GetTypeMeta().Kind, Name: obj.GetObjectMeta().Name}
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
