package kubetest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// clientCA signs the client certificates the API server takes: a user
// is the certificate's CN, its groups are its O, as the API server reads
// a certificate.
type clientCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newClientCA() (*clientCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kubetest client CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &clientCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// issue returns a client certificate of user in groups and its key, in
// PEM.
func (ca *clientCA) issue(user string, groups []string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: user, Organization: groups},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// userConfig returns a client configuration whose client certificate
// names user, in groups: CN=user, O=each group.
func (s *Server) userConfig(user string, groups ...string) (*rest.Config, error) {
	certPEM, keyPEM, err := s.ca.issue(user, groups)
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host:            s.URL,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true, CertData: certPEM, KeyData: keyPEM},
		QPS:             100, Burst: 200,
	}, nil
}

// UserClient returns a dynamic client whose client certificate names
// user, in groups.
func (s *Server) UserClient(user string, groups ...string) (dynamic.Interface, error) {
	cfg, err := s.userConfig(user, groups...)
	if err != nil {
		return nil, err
	}
	return dynamic.NewForConfig(cfg)
}

// Kubeconfig writes at path a kubeconfig whose client certificate names
// user, in groups, as marshald --kubeconfig reads one.
func (s *Server) Kubeconfig(path, user string, groups ...string) error {
	cfg, err := s.userConfig(user, groups...)
	if err != nil {
		return err
	}
	return os.WriteFile(path, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: user
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: test
  context: {cluster: test, user: user}
current-context: test
`, s.URL, base64.StdEncoding.EncodeToString(cfg.CertData), base64.StdEncoding.EncodeToString(cfg.KeyData)), 0o600)
}
