// Package kubetest runs a real etcd and a real kube-apiserver on loopback
// for tests: a token of a cluster admin, client certificates for any user
// and groups (as a fleet's hosts hold: CN=marshal:host:<host>,
// O=marshal:hosts), RBAC authorization and ValidatingAdmissionPolicy
// admission, the API server's own serving certificate. It applies the
// files of a kustomization as kubectl apply -k would, and waits until
// what they install is in force. It finds the binaries through
// $MARSHAL_KUBE_APISERVER and $MARSHAL_ETCD, else PATH; .ci/run builds
// kube-apiserver from the tools module and installs etcd. Tests that
// cannot have them skip.
//
// It is imported only by tests.
package kubetest
