// Package agentstop ends agents on request, as kubelet stops a container
// and systemd a unit: SIGTERM to every process of the agent's scope, and
// SIGKILL to the whole tree once a grace period has passed (at once for
// a grace of zero). A scope that emptied in time is left alone: the kill
// of a scope that is gone does nothing.
//
// What an agent's end means for its reservation and its slot is the
// agent controller's, on evidence, as for any agent that ends; this
// package only signals. The kills it has pending are held in memory: a
// marshald stopped during a grace period does not send them, and the
// agent is stopped again by asking again.
package agentstop
