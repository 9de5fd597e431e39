// Package applier is server-side apply for marshald: it turns the
// manifests a user sends with `marshalctl apply` into files in the config
// dir, one per object under applied/, and `marshalctl delete` into the
// removal of the file that declares an object. The config dir stays the
// only source of truth; the manifest source picks the files up like any
// other edit.
//
// Every request is validated strictly with the loader before anything is
// written, files are written atomically (a dotfile temporary, fsync,
// rename, fsync of the directory), an object another file declares is
// never shadowed, and an unchanged object is never rewritten.
//
// It does not watch the config dir or keep the declarations: callers pass
// them in as Declarations, adapted from the manifest source. Callers
// serialize Apply and Delete on one config dir.
package applier
