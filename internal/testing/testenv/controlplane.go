package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gatehouse-dev/gatehouse/internal/certs"
	"github.com/gatehouse-dev/gatehouse/internal/testing/fakenode"
)

// RepoRoot finds the module root by walking up to go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// ControlPlane is a running etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler, with fake Nodes for the scheduler to bind Pods to.
type ControlPlane struct {
	Env    *envtest.Environment
	Config *rest.Config
	Client client.Client
	Scheme *runtime.Scheme
	// Dir holds the kubeconfigs and logs of kube-controller-manager,
	// kube-scheduler and the fake nodes.
	Dir string
	// Nodes are the fake Nodes, kept Ready until Stop.
	Nodes *fakenode.Nodes
	// RealNode is the kubelet-run Node, when ControlPlaneOptions.RealNode
	// asked for one.
	RealNode *RealNode
	// WebhookClient is the CA and the client certificate kube-apiserver
	// presents to admission webhooks (its AdmissionConfiguration's
	// kubeConfigFile, user "*"), as a cluster that authenticates to
	// Gatehouse does; WebhookClientCAFile holds its CA for --client-ca-file.
	WebhookClient       *certs.ClientBundle
	WebhookClientCAFile string
	// AuditLog is kube-apiserver's audit log (JSON lines) of PVC
	// deletions, at level Metadata: webhooks' audit annotations included.
	AuditLog string

	// ServerVersion is what the started kube-apiserver reports: tests
	// that depend on the minor read it here, never assume bin/'s.
	ServerVersion *version.Info

	// binaries are the paths of etcd and the Kubernetes binaries of the
	// minor KubeMinor selects (kubeBinary).
	binaries   map[string]string
	components []*component
	nodeLog    *os.File
	// processLogs receive etcd's and kube-apiserver's output.
	processLogs []*os.File
	removeDir   bool
}

// ControlPlaneOptions configures StartControlPlane.
type ControlPlaneOptions struct {
	// CRDPaths are directories or files of CRDs to install, relative to the
	// repository root. Default: config/crd/bases (Gatehouse's) and
	// config/crd/external (other projects' that modules work with, such as
	// Flux's HelmRelease), those that exist.
	CRDPaths []string
	// AddToScheme registers extra types on the client's scheme.
	AddToScheme []func(*runtime.Scheme) error
	// Dir receives the kubeconfigs and logs of kube-controller-manager,
	// kube-scheduler and the fake nodes. Default: a temporary directory,
	// removed by Stop.
	Dir string
	// Nodes configures the fake Nodes. The zero value registers three, in
	// zone-a, zone-b and zone-c.
	Nodes fakenode.Options
	// RealNode, when set, adds a real Node beside the fake ones: containerd
	// and a kubelet, with the given images imported (docs/real-node.md).
	RealNode *RealNodeOptions
}

// Controllers are the kube-controller-manager controllers the control plane
// runs: those that make namespaces terminate, volumes bind, owners cascade
// and workloads produce Pods, with what they lean on. The cloud controllers,
// node IPAM and those that fill a cluster with objects no test asked for
// (endpoint slices, the kube-root-ca.crt ConfigMap in every namespace,
// DaemonSet Pods on every Node) stay off.
var Controllers = []string{
	"namespace-controller",
	"garbage-collector-controller",
	"persistentvolume-binder-controller",
	"persistentvolume-protection-controller",
	"persistentvolumeclaim-protection-controller",
	"deployment-controller",
	"replicaset-controller",
	"replicationcontroller-controller",
	"statefulset-controller",
	"job-controller",
	"cronjob-controller",
	"ttl-after-finished-controller",
	"disruption-controller",
	"node-lifecycle-controller",
	"pod-garbage-collector-controller",
	"serviceaccount-controller",
	"serviceaccount-token-controller",
	"clusterrole-aggregation-controller",
}

// DefaultCRDPaths are the CRDs a control plane installs unless told:
// Gatehouse's and those of other projects its modules work with.
func DefaultCRDPaths() []string { return []string{"config/crd/bases", "config/crd/external"} }

// PolicyReportCRDs holds the wgpolicyk8s.io PolicyReport CRDs, which a
// control plane installs only when asked (make run does; the e2e tests of
// the reports install and remove them).
const PolicyReportCRDs = "config/crd/policyreport"

// OpenReportsCRDs holds the openreports.io Report CRDs, installed only when
// asked, as PolicyReportCRDs.
const OpenReportsCRDs = "config/crd/openreports"

// StartControlPlane starts etcd and kube-apiserver (through envtest), then
// kube-controller-manager and kube-scheduler, all from bin/ (the Kubernetes
// ones from bin/kube-<minor>/ when KubeMinorEnv picks a minor), and registers
// the fake Nodes. A missing binary is an error telling how to build it:
// tests never skip for it.
func StartControlPlane(opts ControlPlaneOptions) (*ControlPlane, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	assets := filepath.Join(root, "bin")
	binaries := map[string]string{}
	names := []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}
	if opts.RealNode != nil {
		names = append(names, "kubelet")
	}
	for _, name := range names {
		if binaries[name], err = kubeBinary(assets, name); err != nil {
			return nil, err
		}
	}
	paths := opts.CRDPaths
	if paths == nil {
		for _, dir := range DefaultCRDPaths() {
			if _, err := os.Stat(filepath.Join(root, dir)); err == nil {
				paths = append(paths, dir)
			}
		}
	}
	for i := range paths {
		paths[i] = filepath.Join(root, paths[i])
	}
	scheme := runtime.NewScheme()
	for _, add := range append([]func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme}, opts.AddToScheme...) {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	cp := &ControlPlane{Scheme: scheme, Dir: opts.Dir, binaries: binaries}
	if cp.Dir == "" {
		if cp.Dir, err = os.MkdirTemp("", "gatehouse-controlplane-"); err != nil {
			return nil, err
		}
		cp.removeDir = true
	} else if err := os.MkdirAll(cp.Dir, 0o700); err != nil {
		return nil, err
	}
	cp.Env = &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		CRDDirectoryPaths:        paths,
		ErrorIfCRDPathMissing:    true,
		Scheme:                   scheme,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	if err := cp.configureProcesses(); err != nil {
		cp.closeLogs()
		cp.cleanDir()
		return nil, err
	}
	// envtest's default /24 holds 254 Services; the benchmarks create a
	// thousand.
	cp.Env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", "10.96.0.0/16")
	admissionConfig, err := cp.writeWebhookClientConfig()
	if err != nil {
		cp.closeLogs()
		cp.cleanDir()
		return nil, err
	}
	// Presenting a client certificate is harmless to a webhook server that
	// asks for none, so every test's admission calls carry it.
	cp.Env.ControlPlane.GetAPIServer().Configure().Set("admission-control-config-file", admissionConfig)
	// An audit log of PVC deletions alone, for the tests that read what a
	// webhook's denial leaves there (its reason annotation).
	auditPolicy := filepath.Join(cp.Dir, "audit-policy.yaml")
	if err := os.WriteFile(auditPolicy, []byte(auditPolicyPVCDeletions), 0o600); err != nil {
		cp.closeLogs()
		cp.cleanDir()
		return nil, err
	}
	cp.AuditLog = filepath.Join(cp.Dir, "audit.log")
	cp.Env.ControlPlane.GetAPIServer().Configure().Set("audit-policy-file", auditPolicy).Set("audit-log-path", cp.AuditLog)
	var nodeIP string
	if opts.RealNode != nil {
		if nodeIP, err = eth0Address(); err == nil {
			err = cp.prepareRealNode(nodeIP)
		}
		if err != nil {
			cp.closeLogs()
			cp.cleanDir()
			return nil, err
		}
	}
	cfg, err := cp.Env.Start()
	if err != nil {
		cp.closeLogs()
		// Kept: the logs say why.
		return nil, fmt.Errorf("start control plane: %w (logs in %s)", err, cp.Dir)
	}
	cp.Config = cfg
	fail := func(err error) (*ControlPlane, error) {
		_ = cp.Stop()
		return nil, err
	}
	if cp.Client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := cp.checkServerVersion(); err != nil {
		return fail(err)
	}
	if err := cp.startComponents(ctx, opts.RealNode != nil); err != nil {
		return fail(err)
	}
	nodeOpts := opts.Nodes
	if nodeOpts.Log.GetSink() == nil {
		if nodeOpts.Log, cp.nodeLog, err = fileLogger(filepath.Join(cp.Dir, "fakenode.log")); err != nil {
			return fail(err)
		}
	}
	if cp.Nodes, err = fakenode.Start(ctx, cfg, nodeOpts); err != nil {
		return fail(fmt.Errorf("fake nodes: %w", err))
	}
	// Until the node lifecycle controller has seen the Nodes Ready they
	// carry the not-ready taint the API server admits them with, and the
	// scheduler would leave a test's first Pods Pending for a while.
	if err := cp.Nodes.WaitSchedulable(ctx); err != nil {
		return fail(err)
	}
	if opts.RealNode != nil {
		if cp.RealNode, err = cp.startRealNode(ctx, *opts.RealNode, nodeIP, cp.binaries["kubelet"]); err != nil {
			return fail(err)
		}
	}
	return cp, nil
}

// configureProcesses has envtest start etcd and kube-apiserver through the
// trampoline (killed with this process; see trampolineFor) and write their
// output to etcd.log and kube-apiserver.log in cp.Dir, which envtest would
// discard: a control plane that fails under load says why.
func (cp *ControlPlane) configureProcesses() error {
	closeInheritedFiles()
	if cp.Env.ControlPlane.Etcd == nil {
		cp.Env.ControlPlane.Etcd = &envtest.Etcd{}
	}
	apiServer, etcd := cp.Env.ControlPlane.GetAPIServer(), cp.Env.ControlPlane.Etcd
	// Their ports from FreePort, below the ephemeral range, rather than
	// envtest's port-0 suggestion, which any outgoing connection on the
	// machine may take before the process binds it (FreePort says more).
	// etcd's peer port is envtest's alone to choose.
	etcdPort, err := FreePort()
	if err != nil {
		return err
	}
	etcd.URL = &url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(etcdPort))}
	apiPort, err := FreePort()
	if err != nil {
		return err
	}
	apiServer.SecureServing.Address, apiServer.SecureServing.Port = "127.0.0.1", strconv.Itoa(apiPort)
	for _, p := range []struct {
		name     string
		path     *string
		out, err *io.Writer
	}{
		{"etcd", &etcd.Path, &etcd.Out, &etcd.Err},
		{"kube-apiserver", &apiServer.Path, &apiServer.Out, &apiServer.Err},
	} {
		path, err := trampolineFor(cp.Dir, cp.binaries[p.name])
		if err != nil {
			return err
		}
		log, err := os.Create(filepath.Join(cp.Dir, p.name+".log"))
		if err != nil {
			return err
		}
		cp.processLogs = append(cp.processLogs, log)
		*p.path, *p.out, *p.err = path, log, log
	}
	return nil
}

func (cp *ControlPlane) closeLogs() {
	for _, f := range cp.processLogs {
		f.Close()
	}
	cp.processLogs = nil
}

// webhookClientKubeconfig names one user, "*", which kube-apiserver's
// webhook client picks for any webhook host that no more specific user
// names (k8s.io/apiserver pkg/util/webhook/authentication.go).
const webhookClientKubeconfig = `apiVersion: v1
kind: Config
users:
- name: "*"
  user:
    client-certificate: %q
    client-key: %q
`

const auditPolicyPVCDeletions = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [delete]
  resources:
  - group: ""
    resources: [persistentvolumeclaims]
- level: None
`

const admissionConfiguration = `apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ValidatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: %[1]q
- name: MutatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: %[1]q
`

// writeWebhookClientConfig creates the webhook client CA and certificate
// in cp.Dir and returns the AdmissionConfiguration file that hands them to
// kube-apiserver's admission webhook plugins.
func (cp *ControlPlane) writeWebhookClientConfig() (string, error) {
	bundle, err := certs.SelfSignedClient("kube-apiserver-webhook-client", 7*24*time.Hour)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cp.Dir, "webhook-client")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	path := func(name string) string { return filepath.Join(dir, name) }
	kubeconfig := fmt.Sprintf(webhookClientKubeconfig, path("tls.crt"), path("tls.key"))
	for name, data := range map[string][]byte{
		"ca.crt": bundle.CACert, "tls.crt": bundle.ClientCert, "tls.key": bundle.ClientKey,
		"kubeconfig":     []byte(kubeconfig),
		"admission.yaml": []byte(fmt.Sprintf(admissionConfiguration, path("kubeconfig"))),
	} {
		if err := os.WriteFile(path(name), data, 0o600); err != nil {
			return "", err
		}
	}
	cp.WebhookClient, cp.WebhookClientCAFile = bundle, path("ca.crt")
	return path("admission.yaml"), nil
}

// startComponents runs kube-controller-manager and kube-scheduler against
// the envtest API server, each under the identity the API server's
// bootstrap RBAC policy grants its permissions to, and waits until both are
// healthy.
func (cp *ControlPlane) startComponents(ctx context.Context, realNode bool) error {
	apiServer := cp.Env.ControlPlane.GetAPIServer()
	// envtest generates the key kube-apiserver signs service-account tokens
	// with (--service-account-signing-key-file) next to its serving
	// certificate; the token controller signs with the same key.
	saKey := filepath.Join(apiServer.CertDir, "sa-signer.key")
	if _, err := os.Stat(saKey); err != nil {
		return fmt.Errorf("the API server's service-account signing key: %w", err)
	}
	caFile := filepath.Join(cp.Dir, "apiserver-ca.crt")
	if err := os.WriteFile(caFile, cp.Config.CAData, 0o600); err != nil {
		return err
	}
	kubeconfig := func(user string) (string, error) {
		u, err := cp.Env.AddUser(envtest.User{Name: user}, nil)
		if err != nil {
			return "", err
		}
		b, err := u.KubeConfig()
		if err != nil {
			return "", err
		}
		path := filepath.Join(cp.Dir, strings.TrimPrefix(user, "system:")+".kubeconfig")
		return path, os.WriteFile(path, b, 0o600)
	}
	common := func(kubeconfig, name string, port int) []string {
		return []string{
			"--kubeconfig=" + kubeconfig,
			// Delegated authentication and authorization of the component's
			// own HTTPS endpoint, as in a cluster; /healthz is always allowed.
			"--authentication-kubeconfig=" + kubeconfig,
			"--authorization-kubeconfig=" + kubeconfig,
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(port),
			"--cert-dir=" + filepath.Join(cp.Dir, name+"-certs"),
			// One replica: leader election would only delay the start.
			"--leader-elect=false",
			"--v=2",
		}
	}

	controllers := Controllers
	if realNode {
		controllers = append(append([]string{}, Controllers...), RealNodeControllers...)
	}
	kcmConfig, err := kubeconfig("system:kube-controller-manager")
	if err != nil {
		return err
	}
	kcmPort, err := FreePort()
	if err != nil {
		return err
	}
	kcm, err := startComponent("kube-controller-manager", cp.binaries["kube-controller-manager"], append(common(kcmConfig, "kube-controller-manager", kcmPort),
		// Each controller acts as its own service account, with the
		// permissions the bootstrap policy gives it, so that webhooks and
		// audit see system:serviceaccount:kube-system:namespace-controller
		// and the like, as in a cluster.
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+saKey,
		"--root-ca-file="+caFile,
		"--controllers="+strings.Join(controllers, ","),
	), filepath.Join(cp.Dir, "kube-controller-manager.log"))
	if err != nil {
		return err
	}
	cp.components = append(cp.components, kcm)

	schedConfig, err := kubeconfig("system:kube-scheduler")
	if err != nil {
		return err
	}
	schedPort, err := FreePort()
	if err != nil {
		return err
	}
	sched, err := startComponent("kube-scheduler", cp.binaries["kube-scheduler"], common(schedConfig, "kube-scheduler", schedPort),
		filepath.Join(cp.Dir, "kube-scheduler.log"))
	if err != nil {
		return err
	}
	cp.components = append(cp.components, sched)

	if err := kcm.waitHealthy(ctx, kcmPort, 2*time.Minute); err != nil {
		return err
	}
	return sched.waitHealthy(ctx, schedPort, 2*time.Minute)
}

// Stop stops the real node (its Pods, kubelet and containerd), the fake
// nodes, kube-scheduler, kube-controller-manager, then kube-apiserver and
// etcd. A component that exited early is reported here.
func (cp *ControlPlane) Stop() error {
	var errs []error
	if cp.RealNode != nil {
		if err := cp.RealNode.stop(); err != nil {
			errs = append(errs, err)
		}
		cp.RealNode = nil
	}
	if cp.Nodes != nil {
		cp.Nodes.Stop()
	}
	if cp.nodeLog != nil {
		cp.nodeLog.Close()
	}
	for i := len(cp.components) - 1; i >= 0; i-- {
		if err := cp.components[i].stop(30 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	cp.components = nil
	if cp.Env != nil {
		if err := cp.Env.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	cp.closeLogs()
	if len(errs) == 0 {
		cp.cleanDir()
	} else if cp.removeDir {
		errs = append(errs, fmt.Errorf("logs kept in %s", cp.Dir))
	}
	return errors.Join(errs...)
}

func (cp *ControlPlane) cleanDir() {
	if cp.removeDir {
		_ = os.RemoveAll(cp.Dir)
	}
}

// AdminKubeconfig returns a kubeconfig for a system:masters user.
func (cp *ControlPlane) AdminKubeconfig() ([]byte, error) {
	user, err := cp.Env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, err
	}
	return user.KubeConfig()
}
