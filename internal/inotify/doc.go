// Package inotify is a small reader of Linux's inotify, for the two
// watchers that need what fsnotify does not give: the cgroup tree
// watcher (IN_MODIFY on cgroup.events, which fsnotify reports without
// the watch it came from) and the manifest source (IN_CLOSE_WRITE,
// which fsnotify v1.10 keeps unexported).
//
// A File is one inotify instance read through the runtime's poller, so
// that Close, or the end of a context, ends a blocked read. Decode walks
// the events of one read. What a watch means, and what to do with its
// events, stays with the caller.
//
// On other systems the package is empty.
package inotify
