//go:build race

package test

// raceEnabled says the tests run with the race detector, so the binaries
// they build use it too.
const raceEnabled = true
