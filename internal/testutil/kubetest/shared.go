package kubetest

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
)

// The server a test binary's tests share, started by the first that
// needs it.
var (
	sharedOnce   sync.Once
	sharedServer *Server
	sharedErr    error
	sharedDir    string
)

// Shared returns the API server the tests of this binary share, started
// with the objects of the files applied, or skips the test when
// kube-apiserver or etcd is missing. When $MARSHAL_KUBE_APISERVER is set
// (CI builds it) they must be there: the test fails instead. The files
// are those of the first call. StopShared stops it.
func Shared(t testing.TB, files ...string) (*Server, dynamic.Interface) {
	t.Helper()
	if _, _, err := Binaries(); err != nil {
		if os.Getenv(EnvAPIServer) != "" {
			t.Fatalf("kube-apiserver or etcd: %v", err)
		}
		t.Skipf("needs kube-apiserver and etcd (.ci/run builds and installs them): %v", err)
	}
	sharedOnce.Do(func() {
		if sharedDir, sharedErr = os.MkdirTemp("", "marshal-kube-"); sharedErr != nil {
			return
		}
		if sharedServer, sharedErr = Start(sharedDir); sharedErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		sharedErr = sharedServer.Apply(ctx, files...)
	})
	if sharedErr != nil {
		t.Fatalf("starting the API server: %v", sharedErr)
	}
	client, err := sharedServer.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	return sharedServer, client
}

// StopShared stops the shared server, if one was started, and removes its
// files. TestMain calls it after the tests.
func StopShared() {
	if sharedServer != nil {
		sharedServer.Stop()
	}
	if sharedDir != "" {
		os.RemoveAll(sharedDir)
	}
}
