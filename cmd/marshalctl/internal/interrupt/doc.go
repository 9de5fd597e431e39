// Package interrupt catches SIGINT and SIGTERM for marshalctl from the
// moment its packages are initialised, so that catching them costs a
// command nothing: the runtime starts a thread and waits for it, once
// per signal, and done in main that wait would come before every
// launch. Importing the package starts catching; NotifyContext turns the
// signals into a context's cancellation.
//
// It is for package main of marshalctl alone: any program that imports
// it, a test binary included, catches the two signals, in the
// background, from its start.
package interrupt
