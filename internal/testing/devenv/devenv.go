package devenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gatehouse-dev/gatehouse/internal/certs"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

// Namespace is Gatehouse's own namespace in the environment, as the
// chart's default release namespace.
const Namespace = "gatehouse-system"

// Options configures an environment.
type Options struct {
	// Dir holds the kubeconfig, certificates and logs (Gatehouse's,
	// kube-controller-manager's, kube-scheduler's and the fake nodes'). Default .gatehouse.
	Dir string
	// WebhookAddr is where Gatehouse serves. Default 127.0.0.1:9443.
	WebhookAddr string
	// MetricsAddr is where Gatehouse serves metrics. Default 127.0.0.1:8080.
	MetricsAddr string
	// Modules to enable, comma-separated. Default: all.
	Modules string
	// CertDir, when set, receives the certificates instead of Dir/certs.
	CertDir string
	// ExtraArgs are appended to gatehouse's command line.
	ExtraArgs []string
	// Log receives Gatehouse's output. Default: a file in Dir.
	Log io.Writer
	// Binary is the gatehouse binary to run. Default: $GATEHOUSE_BINARY,
	// else bin/gatehouse (what make build writes).
	Binary string
	// Env is added to Gatehouse's environment (GOMEMLIMIT, say).
	Env []string
	// RealNode, when set, adds a kubelet-run Node beside the fake ones
	// (make run REAL_NODE=1; docs/real-node.md).
	RealNode *testenv.RealNodeOptions
	// ClientAuth has Gatehouse serve webhook calls only from callers
	// presenting the client certificate kube-apiserver presents to
	// webhooks (--client-ca-file; the control plane's
	// AdmissionConfiguration hands it one), as a self-managed platform
	// configures it: Gatehouse then trusts the reviews' userInfo and runs
	// every check (make run). Unset, it serves any caller, as the chart
	// does by default (the load benchmark and the chaos tests, which post
	// straight to the port as anyone reaching it would).
	ClientAuth bool
	// PolicyReports installs the report CRDs, OpenReports'
	// (config/crd/openreports) and wg-policy's (config/crd/policyreport),
	// so that the modules' periodic checks are written as reports (make
	// run: as openreports.io Reports, the API auto chooses where both are).
	PolicyReports bool
}

// Env is a running environment.
type Env struct {
	ControlPlane *testenv.ControlPlane
	Kubeconfig   string
	URL          string
	CACert       []byte
	Process      *exec.Cmd
	HTTPClient   *http.Client

	exited chan error
	binary string
	args   []string
	env    []string
	logOut io.Writer
	// logPath is Gatehouse's log file when Start made it (Options.Log
	// unset): its tail goes into the error of a start that fails.
	logPath string
	lock    *dirLock
}

// Start brings the environment up and returns once Gatehouse is ready.
func Start(ctx context.Context, opts Options) (*Env, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	if opts.Dir == "" {
		opts.Dir = filepath.Join(root, ".gatehouse")
	}
	if opts.WebhookAddr == "" {
		opts.WebhookAddr = "127.0.0.1:9443"
	}
	if opts.MetricsAddr == "" {
		opts.MetricsAddr = "127.0.0.1:8080"
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, err
	}
	// Before anything in Dir is touched: a second environment must leave
	// the first one's certificates and kubeconfig alone.
	lock, err := lockDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	binary := opts.Binary
	if binary == "" {
		binary = os.Getenv("GATEHOUSE_BINARY")
	}
	if binary == "" {
		binary = filepath.Join(root, "bin", "gatehouse")
	}
	if _, err := os.Stat(binary); err != nil {
		lock.release()
		return nil, fmt.Errorf("%s not found: run `make build`", binary)
	}

	cpOpts := testenv.ControlPlaneOptions{Dir: opts.Dir, RealNode: opts.RealNode}
	if opts.PolicyReports {
		cpOpts.CRDPaths = append(testenv.DefaultCRDPaths(), testenv.PolicyReportCRDs, testenv.OpenReportsCRDs)
	}
	cp, err := testenv.StartControlPlane(cpOpts)
	if err != nil {
		lock.release()
		return nil, err
	}
	env := &Env{ControlPlane: cp, exited: make(chan error, 1), lock: lock}
	fail := func(err error) (*Env, error) {
		_ = env.Stop() // err is the cause
		return nil, err
	}
	kubeconfig, err := cp.AdminKubeconfig()
	if err != nil {
		return fail(err)
	}
	env.Kubeconfig = filepath.Join(opts.Dir, "kubeconfig")
	if err := os.WriteFile(env.Kubeconfig, kubeconfig, 0o600); err != nil {
		return fail(err)
	}
	host, _, _ := strings.Cut(opts.WebhookAddr, ":")
	bundle, err := certs.SelfSigned([]string{host, "localhost"}, 7*24*time.Hour)
	if err != nil {
		return fail(err)
	}
	certDir := opts.CertDir
	if certDir == "" {
		certDir = filepath.Join(opts.Dir, "certs")
	}
	if err := bundle.WriteDir(certDir); err != nil {
		return fail(err)
	}
	env.CACert = bundle.CACert
	env.URL = "https://" + opts.WebhookAddr
	// Gatehouse's namespace exists as the chart makes it: what Gatehouse
	// keeps there (pvsafe's protected bypass record, a tenant cannot
	// delete it) is otherwise never written.
	if err := createNamespace(ctx, cp, Namespace); err != nil {
		return fail(err)
	}

	clientCAFile := ""
	if opts.ClientAuth {
		clientCAFile = cp.WebhookClientCAFile
	}
	env.binary, env.args, env.env = binary, gatehouseArgs(opts, env.Kubeconfig, certDir, env.URL, clientCAFile), opts.Env
	env.logOut = opts.Log
	if env.logOut == nil {
		env.logPath = filepath.Join(opts.Dir, "gatehouse.log")
		f, err := os.Create(env.logPath)
		if err != nil {
			return fail(err)
		}
		env.logOut = f
	}
	if err := env.startProcess(); err != nil {
		return fail(err)
	}

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(bundle.CACert)
	tlsConfig := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if b := cp.WebhookClient; opts.ClientAuth && b != nil {
		// The API server's certificate: HTTPClient's posts are served
		// as the API server's are (its probes need none).
		pair, err := tls.X509KeyPair(b.ClientCert, b.ClientKey)
		if err != nil {
			return fail(err)
		}
		tlsConfig.Certificates = []tls.Certificate{pair}
	}
	env.HTTPClient = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	if err := env.waitReady(ctx, 2*time.Minute); err != nil {
		return fail(err)
	}
	return env, nil
}

// gatehouseArgs is Gatehouse's command line: clientCAFile, when set, is the
// CA its webhook callers' certificates must chain to.
func gatehouseArgs(opts Options, kubeconfig, certDir, url, clientCAFile string) []string {
	args := []string{
		"--kubeconfig", kubeconfig,
		"--cert-dir", certDir,
		// The keys that sign Gatehouse's records outlive a restart (the
		// certificates are made again each time): records signed by the
		// previous run still verify.
		"--records-key-dir", filepath.Join(opts.Dir, "records-key"),
		"--webhook-bind-address", opts.WebhookAddr,
		"--metrics-bind-address", opts.MetricsAddr,
		"--namespace", Namespace,
		"--manage-webhooks-url", url,
		"--manage-webhooks-ca-file", filepath.Join(certDir, "ca.crt"),
	}
	if clientCAFile != "" {
		args = append(args, "--client-ca-file", clientCAFile)
	}
	if opts.Modules != "" {
		args = append(args, "--modules", opts.Modules)
	}
	return append(args, opts.ExtraArgs...)
}

func (e *Env) startProcess() error {
	cmd := exec.Command(e.binary, e.args...)
	cmd.Stdout, cmd.Stderr = e.logOut, e.logOut
	if len(e.env) > 0 {
		cmd.Env = append(os.Environ(), e.env...)
	}
	// Its own process group: a Ctrl-C reaches devenv, which then stops
	// Gatehouse once, gracefully, instead of Gatehouse seeing two signals.
	// Killed with devenv or the test binary, as the control plane is.
	cmd.SysProcAttr = testenv.ProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start gatehouse: %w", err)
	}
	e.Process = cmd
	exited := make(chan error, 1)
	e.exited = exited
	go func() { exited <- cmd.Wait() }()
	return nil
}

// Kill ends Gatehouse with SIGKILL (no graceful shutdown) and waits for it.
func (e *Env) Kill() error {
	if err := e.Process.Process.Kill(); err != nil {
		return err
	}
	err := <-e.exited
	e.exited <- err // later readers (Stop, Exited) see the exit too
	return nil
}

// Restart starts Gatehouse again with the same command line and returns once
// it is ready.
func (e *Env) Restart(ctx context.Context) error {
	if err := e.startProcess(); err != nil {
		return err
	}
	return e.waitReady(ctx, 2*time.Minute)
}

func (e *Env) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	last := "no answer"
	for time.Now().Before(deadline) {
		if resp, err := e.HTTPClient.Get(e.URL + "/readyz"); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = strings.TrimSpace(string(body))
		}
		select {
		case err := <-e.exited:
			e.exited <- err
			return fmt.Errorf("gatehouse exited before it was ready: %v%s", err, e.logTail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("gatehouse not ready after %s: %s", timeout, last)
}

// logTail is the end of Gatehouse's log file, for an error that says why it
// did not start ("" when its output goes elsewhere).
func (e *Env) logTail() string {
	if e.logPath == "" {
		return ""
	}
	return "; the end of " + e.logPath + ":\n" + testenv.LogTail(e.logPath, 15)
}

// Exited reports Gatehouse's exit.
func (e *Env) Exited() <-chan error { return e.exited }

// Stop sends SIGTERM to Gatehouse, waits for its graceful shutdown, then stops
// the control plane.
func (e *Env) Stop() error {
	var errs []error
	if e.Process != nil && e.Process.Process != nil {
		_ = e.Process.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-e.exited:
			e.exited <- err // later readers (Exited) see the exit too
		case <-time.After(40 * time.Second):
			_ = e.Process.Process.Kill()
			errs = append(errs, errors.New("gatehouse did not stop within 40s; killed"))
		}
	}
	if e.ControlPlane != nil {
		if err := e.ControlPlane.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	e.lock.release()
	return errors.Join(errs...)
}

// createNamespace creates namespace name, which may exist already (a
// control plane kept from an earlier start).
func createNamespace(ctx context.Context, cp *testenv.ControlPlane, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := cp.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}
