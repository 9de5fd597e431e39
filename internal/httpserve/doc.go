// Package httpserve runs an http.Server for as long as a context lives:
// the one way marshald's local API and its metrics listener start, stop
// and report errors. It is not a router or a middleware kit.
package httpserve
