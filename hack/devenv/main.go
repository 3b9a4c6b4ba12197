// Command devenv is `make run`: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, fake Nodes and Gatehouse on loopback, with every module
// enabled, until Ctrl-C or SIGTERM.
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/catalogue"
	"github.com/gatehouse-dev/gatehouse/internal/sandbox"
	"github.com/gatehouse-dev/gatehouse/internal/testing/devenv"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

func main() { os.Exit(run()) }

// run is main's body: its deferred calls run before the process exits.
func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var names []string
	missingHAProxy := ""
	for _, m := range catalogue.All() {
		if m.Name() == "configcheck" {
			if err := haproxyInstalled(); err != nil {
				missingHAProxy = err.Error()
				continue
			}
			if caps := sandbox.Available(); !caps.Complete() && !strings.Contains(os.Getenv("GATEHOUSE_ARGS"), "--configcheck-allow-unconfined") && !strings.Contains(os.Getenv("GATEHOUSE_ARGS"), "--configcheck-confinement=bestEffort") {
				missingHAProxy = "this kernel cannot confine its checks (" + strings.Join(caps.Missing(), "; ") +
					"); GATEHOUSE_ARGS=--configcheck-confinement=bestEffort make run starts it anyway"
				continue
			}
		}
		names = append(names, m.Name())
	}
	if missingHAProxy != "" {
		fmt.Fprintln(os.Stderr, "gatehouse: configcheck is left out:", missingHAProxy)
	}
	extra := strings.Fields(os.Getenv("GATEHOUSE_ARGS"))
	if os.Geteuid() == 0 && slices.Contains(names, "configcheck") && !strings.Contains(os.Getenv("GATEHOUSE_ARGS"), "--sandbox-runner-") {
		// make run runs Gatehouse as root: without another user, a check
		// would own every root-owned file (a key, a token) that Landlock
		// does not hide. A runner under nobody:nogroup starts them
		// (docs/configcheck.md, "Separate identity").
		extra = append([]string{"--sandbox-runner-user=65534:65534"}, extra...)
	}
	// ClientAuth: kube-apiserver presents a client certificate to the
	// webhooks (its AdmissionConfiguration) and Gatehouse serves only it, as
	// a self-managed platform is set up (docs/security.md), so every check
	// runs (a config's rendering of the cluster's state at its admission
	// among them).
	opts := devenv.Options{Modules: strings.Join(names, ","), ExtraArgs: extra, Log: os.Stderr, PolicyReports: true, ClientAuth: true}
	var gatehouseImage string
	if os.Getenv("REAL_NODE") == "1" {
		var err error
		if opts.RealNode, gatehouseImage, err = realNodeOptions(); err != nil {
			fmt.Fprintln(os.Stderr, "gatehouse:", err)
			return 1
		}
		fmt.Println("gatehouse: REAL_NODE=1: containerd and a kubelet join as a real Node (docs/real-node.md)")
	}
	fmt.Println("gatehouse: starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler, fake nodes and gatehouse (modules:", strings.Join(names, ", ")+")")
	env, err := devenv.Start(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gatehouse:", err)
		return 1
	}
	cp := env.ControlPlane
	var controllers []string
	all := testenv.Controllers
	if cp.RealNode != nil {
		all = append(append([]string{}, all...), testenv.RealNodeControllers...)
	}
	for _, c := range all {
		controllers = append(controllers, strings.TrimSuffix(c, "-controller"))
	}
	fmt.Printf("gatehouse: kube-controller-manager (%s) and kube-scheduler run; their logs are in .gatehouse/\n", strings.Join(controllers, ", "))
	fmt.Printf("gatehouse: fake nodes %s (zones %s): Pods are scheduled onto them but never started (no kubelet)\n",
		strings.Join(cp.Nodes.Names(), ", "), strings.Join(cp.Nodes.Zones(), ", "))
	if node := cp.RealNode; node != nil {
		fmt.Printf(`gatehouse: real node %s (%s, Pods on the bridge %s, logs in .gatehouse/real-node/), tainted %s:NoSchedule;
    a Pod runs there with that toleration and nodeSelector %s=true, images with imagePullPolicy Never:
    bin/kubectl --kubeconfig .gatehouse/kubeconfig run demo --image=%s --image-pull-policy=Never --restart=Never \
      --overrides='{"spec":{"nodeSelector":{"%s":"true"},"tolerations":[{"key":"%s","operator":"Exists","effect":"NoSchedule"}]}}' -- version
    bin/kubectl --kubeconfig .gatehouse/kubeconfig logs demo
    ctr --address %s -n k8s.io images ls   # the imported images
`, node.Name, node.IP, node.PodCIDR, testenv.RealNodeTaint, testenv.RealNodeLabel, gatehouseImage,
			testenv.RealNodeLabel, testenv.RealNodeTaint, node.ContainerdAddress)
	}
	fmt.Printf(`gatehouse: webhooks at %s (served only to kube-apiserver's client certificate, .gatehouse/webhook-client/; --client-ca-file), metrics at http://127.0.0.1:8080/metrics
gatehouse: kubeconfig written to .gatehouse/kubeconfig; try
    bin/kubectl --kubeconfig .gatehouse/kubeconfig get validatingwebhookconfigurations
gatehouse: ready%s
`, env.URL, sinceMakeRun())
	if missingHAProxy != "" {
		fmt.Fprintln(os.Stderr, "gatehouse: configcheck is not running:", missingHAProxy)
	}

	code := 0
	select {
	case <-ctx.Done():
		fmt.Println("\ngatehouse: shutting down")
	case err := <-env.Exited():
		fmt.Fprintln(os.Stderr, "gatehouse: the gatehouse process exited:", err)
		code = 1
	}
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "gatehouse:", err)
		code = 1
	}
	fmt.Println("gatehouse: stopped")
	return code
}

// sinceMakeRun is " in 12m3s (since make run started)" when make run
// passed its start time (GATEHOUSE_RUN_STARTED, Unix seconds), so that the
// ready line tells a newcomer what the whole first wait cost, builds
// included.
func sinceMakeRun() string {
	started, err := strconv.ParseInt(os.Getenv("GATEHOUSE_RUN_STARTED"), 10, 64)
	if err != nil || started <= 0 {
		return ""
	}
	return fmt.Sprintf(" in %s (since make run started)", time.Since(time.Unix(started, 0)).Round(time.Second))
}

// realNodeOptions imports the images make image and make pause-image
// wrote (or GATEHOUSE_IMAGE_ARCHIVE and PAUSE_IMAGE_ARCHIVE name), the pause image as the sandbox image, and returns the Gatehouse
// image's reference.
func realNodeOptions() (*testenv.RealNodeOptions, string, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, "", err
	}
	gatehouse, pause := os.Getenv("GATEHOUSE_IMAGE_ARCHIVE"), os.Getenv("PAUSE_IMAGE_ARCHIVE")
	if gatehouse == "" {
		gatehouse = filepath.Join(root, "bin", "gatehouse-image.tar")
	}
	if pause == "" {
		pause = filepath.Join(root, "bin", "pause-image.tar")
	}
	refs := map[string]string{}
	for _, archive := range []string{gatehouse, pause} {
		ref, err := testenv.ImageArchiveRef(archive)
		if err != nil {
			return nil, "", fmt.Errorf("REAL_NODE=1 imports the images: %w (make image pause-image writes them)", err)
		}
		refs[archive] = ref
	}
	return &testenv.RealNodeOptions{PauseImage: refs[pause], Images: []string{pause, gatehouse}}, refs[gatehouse], nil
}

// haproxyInstalled says how to install haproxy when configcheck cannot find
// it (it runs haproxy -c on every rendering).
func haproxyInstalled() error {
	if _, err := exec.LookPath("haproxy"); err == nil {
		return nil
	}
	if _, err := os.Stat("/usr/sbin/haproxy"); err == nil {
		return nil
	}
	return fmt.Errorf("haproxy is not installed; install Debian's package (sudo apt-get install haproxy) and run make run again")
}
