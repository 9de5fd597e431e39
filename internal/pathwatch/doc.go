// Package pathwatch tells when a path appears, disappears or changes
// (becomes a file, loses its permissions), without polling: it watches,
// with inotify through fsnotify, the nearest existing directory above each
// path, and re-arms as directories come and go.
//
// marshald uses it for workspace roots, so that a workspace turns Ready
// the moment its root is created and stops being Ready the moment it is
// removed, with zero work while nothing happens. It is not a recursive
// watcher: changes inside a path are not reported.
package pathwatch
