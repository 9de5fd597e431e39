// Package kubetest runs a real etcd and a real kube-apiserver on loopback
// for tests: a token file with a cluster admin and a few host users in
// the group dist/kubernetes binds, RBAC authorization, the API server's
// own serving certificate. It finds the binaries through
// $MARSHAL_KUBE_APISERVER and $MARSHAL_ETCD, else PATH; .ci/run builds
// kube-apiserver from the tools module and installs etcd. Tests that
// cannot have them skip.
//
// It is imported only by tests.
package kubetest
