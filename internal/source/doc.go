// Package source is the config directory as a source of manifests: it
// watches the directory with inotify, reloads only the files that
// changed, and hands each changed file, whole, as a unit to an
// intake.Feed, which declares their objects.
//
// Two parts, in the order a change flows through them, as kubelet's file
// source is split from its merge: the watcher turns events into batches of
// paths to look at; the loader stats and reads what a batch names and says
// how each file now loads. What the loads declare (conflicts, the single
// Host, last good versions, the hold of an emptied directory) is package
// intake's. One goroutine, Start's, runs both and hands the feed its
// units.
//
// A complete change is acted on at once: a file renamed into the
// directory, a writer closing its file (IN_CLOSE_WRITE), a symlink or a
// ConfigMap's ..data swapped in. Only what may still be under way waits,
// and only until its path has been quiet for the Debounce: a file written
// in place and not closed yet, a file removed (an editor may be moving it
// aside to write the new version). A file emptied in place is believed
// only after Settle. Where inotify is not available (fsnotify on other
// systems) nothing is known to be complete, and every change waits.
//
// Events are hints and the directory listing is the truth: a directory
// created, deleted or renamed, a symlink swap of the whole tree (Kubernetes
// ConfigMap ..data, a git checkout) and an inotify queue overflow end in a
// stat-level relist, and a cheap periodic relist catches whatever events
// missed; a relist leaves a file that is still changing to its own look.
//
// By the feed's rules, a file that stops loading keeps its last good
// objects (persisted, so a restart keeps them) and they are marked Invalid with the file's errors.
// A directory that vanishes, or goes from some objects to none in one
// change, is held: nothing is deleted until it comes back or a person
// confirms.
//
// Parsing and validation are package loader's; this package decides when
// to load, and package intake what a load means for the declarations.
package source
