// Package apiservertest runs a real apiserver on a real unix socket in a
// test, backed by Daemon: a small in-memory implementation of
// apiserver.Daemon whose objects, events, info and doctor report the test
// sets, and whose Apply and Delete run package applier on a real config
// dir. It is the one fake of the local API's tests; marshald itself is
// tested end to end elsewhere.
//
// It is imported only by tests.
package apiservertest
