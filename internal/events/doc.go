// Package events records what happens to objects, as Kubernetes events:
// Normal or Warning, a CamelCase reason, a message, counted when repeated,
// bounded in number and persisted in the state database, so that
// `marshalctl events` and `describe` show them across restarts.
package events
