package kubetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// Environment variables that name the binaries; without them, they are
// looked up in PATH.
const (
	EnvAPIServer = "MARSHAL_KUBE_APISERVER"
	EnvEtcd      = "MARSHAL_ETCD"
)

// startTimeout bounds how long the API server may take to be ready. It
// is a failure bound: on a busy 2-core machine it is ready in seconds.
const startTimeout = 2 * time.Minute

// Binaries returns the paths of kube-apiserver and etcd, or why they
// cannot be had.
func Binaries() (apiserver, etcd string, err error) {
	find := func(env, name string) (string, error) {
		if p := os.Getenv(env); p != "" {
			if _, err := os.Stat(p); err != nil {
				return "", fmt.Errorf("$%s: %w", env, err)
			}
			return p, nil
		}
		p, err := exec.LookPath(name)
		if err != nil {
			return "", fmt.Errorf("%s not in PATH and $%s not set", name, env)
		}
		return p, nil
	}
	if apiserver, err = find(EnvAPIServer, "kube-apiserver"); err != nil {
		return "", "", err
	}
	if etcd, err = find(EnvEtcd, "etcd"); err != nil {
		return "", "", err
	}
	return apiserver, etcd, nil
}

// Server is an etcd and a kube-apiserver on loopback.
type Server struct {
	dir            string
	apiserverPath  string
	etcdPath       string
	etcdURL        string
	port           int
	adminToken     string
	ca             *clientCA
	etcd, kubeAPI  *process
	kubeAPIStarted int

	// URL is the API server's address.
	URL string
}

// process is a child that a Server runs.
type process struct {
	cmd    *exec.Cmd
	log    *lockedBuffer
	exited chan struct{}
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func start(name string, args ...string) (*process, error) {
	p := &process{log: &lockedBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(name, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	// Its own process group, so that it does not get the test's signals.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		p.cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// stop ends the process with SIGTERM, then SIGKILL.
func (p *process) stop() {
	if p == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// Start starts etcd and kube-apiserver with their files in dir, and
// waits until the API server is ready.
func Start(dir string) (*Server, error) {
	apiserver, etcd, err := Binaries()
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, apiserverPath: apiserver, etcdPath: etcd}
	if err := s.prepare(); err != nil {
		return nil, err
	}
	clientPort, err := freePort()
	if err != nil {
		return nil, err
	}
	peerPort, err := freePort()
	if err != nil {
		return nil, err
	}
	s.etcdURL = fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	s.etcd, err = start(etcd,
		"--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", s.etcdURL, "--advertise-client-urls", s.etcdURL,
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peerPort),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peerPort),
		"--initial-cluster", fmt.Sprintf("default=http://127.0.0.1:%d", peerPort),
		"--unsafe-no-fsync")
	if err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	if s.port, err = freePort(); err != nil {
		s.Stop()
		return nil, err
	}
	s.URL = fmt.Sprintf("https://127.0.0.1:%d", s.port)
	if err := s.StartAPIServer(); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// prepare writes the admin's token file, the client CA and the service
// account key.
func (s *Server) prepare() error {
	s.adminToken = token()
	admin := fmt.Sprintf("%s,admin,admin,system:masters\n", s.adminToken)
	if err := os.WriteFile(filepath.Join(s.dir, "tokens.csv"), []byte(admin), 0o600); err != nil {
		return err
	}
	var err error
	if s.ca, err = newClientCA(); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.dir, "client-ca.crt"), s.ca.pem, 0o600); err != nil {
		return err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	der := x509.MarshalPKCS1PrivateKey(key)
	return os.WriteFile(filepath.Join(s.dir, "sa.key"), pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: der}), 0o600)
}

// StartAPIServer starts kube-apiserver (again, after StopAPIServer) and
// waits until it is ready.
func (s *Server) StartAPIServer() error {
	s.kubeAPIStarted++
	var err error
	s.kubeAPI, err = start(s.apiserverPath,
		"--etcd-servers", s.etcdURL,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(s.port),
		"--cert-dir", filepath.Join(s.dir, "certs"),
		"--token-auth-file", filepath.Join(s.dir, "tokens.csv"),
		"--client-ca-file", filepath.Join(s.dir, "client-ca.crt"),
		"--authorization-mode", "RBAC",
		// dist/kubernetes's policy keeps each host to its own objects.
		"--enable-admission-plugins", "ValidatingAdmissionPolicy",
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", filepath.Join(s.dir, "sa.key"),
		"--service-account-signing-key-file", filepath.Join(s.dir, "sa.key"),
		"--service-cluster-ip-range", "10.0.0.0/24",
		"--enable-priority-and-fairness=false",
		"--disable-admission-plugins", "ServiceAccount",
		// Loopback cannot be advertised as the kubernetes Service's endpoint.
		"--endpoint-reconciler-type", "none",
	)
	if err != nil {
		return fmt.Errorf("kube-apiserver: %w", err)
	}
	return s.waitReady()
}

// waitReady polls /readyz: the API server signals readiness no other way.
func (s *Server) waitReady() error {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-s.kubeAPI.exited:
			return fmt.Errorf("kube-apiserver exited:\n%s", tail(s.kubeAPI.log.String()))
		case <-s.etcd.exited:
			return fmt.Errorf("etcd exited:\n%s", tail(s.etcd.log.String()))
		default:
		}
		req, _ := http.NewRequest("GET", s.URL+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+s.adminToken)
		if resp, err := client.Do(req); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && bytes.Equal(bytes.TrimSpace(body), []byte("ok")) {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kube-apiserver not ready after %v:\n%s", startTimeout, tail(s.kubeAPI.log.String()))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// StopAPIServer stops kube-apiserver, leaving etcd running.
func (s *Server) StopAPIServer() {
	s.kubeAPI.stop()
}

// Stop stops both.
func (s *Server) Stop() {
	s.kubeAPI.stop()
	s.etcd.stop()
}

// Log returns the API server's log, for a failing test.
func (s *Server) Log() string {
	if s.kubeAPI == nil {
		return ""
	}
	return tail(s.kubeAPI.log.String())
}

// Admin returns a client configuration of a cluster admin.
func (s *Server) Admin() *rest.Config { return s.config(s.adminToken) }

// AdminClient returns a dynamic client of a cluster admin.
func (s *Server) AdminClient() (dynamic.Interface, error) { return dynamic.NewForConfig(s.Admin()) }

func (s *Server) config(token string) *rest.Config {
	return &rest.Config{
		Host: s.URL, BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             100, Burst: 200,
	}
}

func token() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// freePort returns a loopback port that is free now and lies below the
// kernel's ephemeral range, for a server that must be told its port
// rather than handed a listener. No bind to port 0 and no outgoing
// connection is given a port from there, so nothing else on the host
// takes it between this check and the server's bind, or while the
// server is down between a stop and a restart.
func freePort() (int, error) {
	const first = 10000
	low, err := ephemeralLow()
	if err != nil {
		return 0, err
	}
	if low <= first {
		return 0, fmt.Errorf("the ephemeral port range starts at %d: no room below it for test servers", low)
	}
	for range 100 {
		port := first + mathrand.IntN(low-first)
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // taken: by another test's server, most likely
		}
		ln.Close()
		return port, nil
	}
	return 0, fmt.Errorf("no free loopback port between %d and %d", first, low)
}

// ephemeralLow is where the kernel's ephemeral port range starts.
func ephemeralLow() (int, error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, err
	}
	fields := strings.Fields(string(b))
	if len(fields) != 2 {
		return 0, fmt.Errorf("ip_local_port_range %q: want two ports", b)
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil {
		return 0, fmt.Errorf("ip_local_port_range %q: %w", b, err)
	}
	return low, nil
}

func tail(s string) string {
	if len(s) > 4000 {
		s = "…" + s[len(s)-4000:]
	}
	return s
}

// Apply creates or updates the objects of the YAML documents in files,
// as a cluster admin, and waits until each CustomResourceDefinition
// among them is established and dist/kubernetes's admission policy, when
// among them, is in force.
func (s *Server) Apply(ctx context.Context, files ...string) error {
	return s.apply(ctx, files)
}
