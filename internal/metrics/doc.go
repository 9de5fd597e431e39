// Package metrics is marshald's Prometheus instrumentation: a private
// registry, the collectors that read the daemon's state when it is
// scraped, the work queue metrics provider, and the HTTP handler and
// loopback listener that serve them.
//
// What is exported, all under the "marshal_" prefix:
//
//   - per controller: reconciles, errors by kind (error, terminal, panic),
//     requeues, active workers, a reconcile duration histogram and the
//     queue's unfinished work, read from reconcile.Controller.Stats at
//     scrape time;
//   - per work queue (Workqueue, a workqueue.MetricsProvider): depth, adds,
//     time in queue, work duration and retries;
//   - live agents (populated scopes) per profile, objects declared per
//     kind, and the config dir's files, load errors and hold;
//   - the admission authority's capacity, target, committed and free
//     amounts per resource, and admissions and launches by result;
//   - the build (marshal_build_info), and the Go runtime and process
//     collectors.
//
// Gauges of state are collected when scraped, from the stores and
// snapshots that already hold that state: nothing here runs a goroutine,
// and an idle daemon is not woken to keep metrics current.
//
// The package does not decide where metrics are served beyond refusing a
// non-loopback TCP address: the daemon mounts Handler on its unix socket
// and, when asked, on ListenTCP's listener. It keeps no history and does
// not push anywhere.
package metrics
