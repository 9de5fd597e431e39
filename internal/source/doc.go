// Package source turns a config directory of manifests into declarations:
// the desired objects marshald reconciles. It watches the directory with
// fsnotify, reloads only the files that changed, and tells a Sink about
// exactly the objects whose declaration changed.
//
// Events are hints and the directory listing is the truth: atomic
// rename-over saves, a directory deleted and created again, a symlink
// swap of the whole tree (Kubernetes ConfigMap ..data, a git checkout) and
// an inotify queue overflow all end in a stat-level relist, and a cheap
// periodic relist catches whatever events missed. A file that stops
// loading keeps its last good objects (persisted, so a restart keeps them)
// and they are marked Invalid with the file's errors. A directory that
// vanishes, or goes from some objects to none in one change, is held:
// nothing is deleted until it comes back or a person confirms.
//
// Parsing and validation are package loader's; this package decides when
// to load and what a load means for the declarations.
package source
