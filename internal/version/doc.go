// Package version says which build of marshal is running: the module
// version and the commit it was built from, for marshalctl version,
// marshald --version, the local API's info and the build-info metric.
//
// The release build sets Version and Commit with the linker:
//
//	go build -ldflags "-X github.com/marshal-dev/marshal/internal/version.Version=v0.3.0 \
//	    -X github.com/marshal-dev/marshal/internal/version.Commit=$(git rev-parse HEAD)" ./cmd/...
//
// Without them, Get falls back to what the Go toolchain recorded in the
// binary (the main module's version, the VCS revision) and then to "dev"
// and "unknown".
//
// It is not a version of the API (see api/v1alpha1) or of the state
// directory's formats, which are versioned by their owners.
package version
