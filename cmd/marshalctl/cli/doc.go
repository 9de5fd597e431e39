// Package cli is marshalctl: the commands, their flags, their output and
// their exit codes. main calls Run; tests call it too, with their own
// streams.
//
// The CLI never imports daemon internals: it reads manifests through the
// loader that the daemon uses, and talks to marshald only over its local
// API.
package cli
