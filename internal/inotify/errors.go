package inotify

import "errors"

// ErrTruncated is returned by Decode when a read ends inside an event:
// the kernel never splits one, so the events of that read are lost.
var ErrTruncated = errors.New("inotify: truncated event")
