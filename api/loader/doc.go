// Package loader reads marshal manifests strictly: YAML or JSON files of
// Profile, Workspace and Host objects (api/v1alpha1), one object per
// document, each validated as written and then defaulted.
//
// Every problem is an *Error that names the file, the line, the object and
// the field path, as in
//
//	ws.yaml:14: Workspace "webapp": spec.resources.request.cpu_milli: must be a positive integer, got -5
//
// Loading is file-atomic: a file with any error contributes no objects, so a
// caller that keeps a file's last good objects never applies half a file.
// LoadDir loads a config directory (recursively, on all cores) and merges
// the files with Merge, which resolves an object declared twice and the
// Host singleton deterministically, so repeated loads of the same tree
// agree. Matches is the contract for which file names count.
//
// Loading is strict: an unknown or duplicate key, a value of the wrong type
// (a string field does not take 123, an integer field takes only
// integers), a declared status or metadata.generation, a file over 1 MiB,
// text that is not UTF-8, YAML merge keys, aliases that expand beyond a
// small bound or reach into another document are all errors. An explicit
// null, an empty list and an empty map mean the same as an omitted field.
//
// LoadInput is the one relaxation, for what a person sends to marshalctl
// apply, diff and delete rather than keeps in a config dir: as kubectl
// does, it ignores the fields only marshald writes and reads a List as
// its items, so the output of marshalctl get applies as it is.
//
// Documents are parsed once into YAML nodes and decoded by a small strict
// decoder driven by the json tags of the API types; line numbers are looked
// up in the nodes only when there is an error.
//
// This package does not watch directories, keep last good objects or
// resolve references between objects (a Workspace's profile); the daemon's
// manifest source and controllers do.
package loader
