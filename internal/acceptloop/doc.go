// Package acceptloop is the accept loop the egress proxy and the netns
// bridge share: it hands a listener's connections to their server until
// a context ends, and waits out a temporary failure (a timeout, a full
// file descriptor table) with a backoff, as net/http does, instead of
// ending.
package acceptloop
