package testenv

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gatehouse-dev/gatehouse/internal/certs"
)

// RealNodeLabel is set on the real Node, and RealNodeTaint keeps every Pod
// that does not tolerate it (all the fake-node workloads of the other
// tests) off it: PlaceOnRealNode adds both to a Pod template.
const (
	RealNodeLabel = "gatehouse.dev/real-node"
	RealNodeTaint = "gatehouse.dev/real-node"
)

// CNIBinDir is where Debian's containernetworking-plugins install the
// plugins (bridge, host-local, loopback).
const CNIBinDir = "/usr/lib/cni"

// RealNodeOptions configures the real node: containerd, runc and the CNI
// plugins from the host's packages and a kubelet from bin/, next to the
// fake Nodes. See docs/real-node.md.
type RealNodeOptions struct {
	// Name of the Node. Default: gatehouse-real-node.
	Name string
	// PauseImage is the sandbox image reference containerd's CRI uses;
	// it must be in one of Images (no registry is reachable).
	PauseImage string
	// Images are OCI or Docker image archives imported into containerd's
	// k8s.io namespace before the kubelet starts; Pods use them with
	// imagePullPolicy Never or IfNotPresent.
	Images []string
}

// RealNode is a running containerd and kubelet registered as a Node.
type RealNode struct {
	Name string
	// IP is the Node's address (eth0's): kube-apiserver reaches the
	// kubelet there for logs and exec.
	IP string
	// PodCIDR is the bridge's /24 Pods get their addresses from.
	PodCIDR string
	// Dir holds containerd's root and state, the kubelet's root dir, the
	// CNI configuration and the logs.
	Dir string
	// ContainerdAddress is containerd's socket, for ctr --address.
	ContainerdAddress string

	plan       cleanupPlan
	containerd *component
	kubelet    *component
	janitor    *exec.Cmd
	janitorIn  *os.File
}

// PlaceOnRealNode makes spec schedulable only on the real node.
func PlaceOnRealNode(spec *corev1.PodSpec) {
	if spec.NodeSelector == nil {
		spec.NodeSelector = map[string]string{}
	}
	spec.NodeSelector[RealNodeLabel] = "true"
	spec.Tolerations = append(spec.Tolerations, corev1.Toleration{
		Key: RealNodeTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule,
	})
}

// RealNodeControllers are added to Controllers in real-node mode:
// kube-apiserver resolves webhook Services through EndpointSlices
// (--enable-aggregator-routing), and every Pod's service-account volume
// projects the kube-root-ca.crt ConfigMap.
var RealNodeControllers = []string{
	"endpointslice-controller",
	"endpoints-controller",
	"root-ca-certificate-publisher-controller",
}

// kubernetesServiceIP is the first address of the harness's
// service-cluster-ip-range (10.96.0.0/16), the `kubernetes` Service's
// ClusterIP, which in-cluster clients dial.
const kubernetesServiceIP = "10.96.0.1"

// eth0Address is the host's address Pods and kube-apiserver reach each
// other by: the kubelet refuses a loopback node IP.
func eth0Address() (string, error) {
	iface, err := net.InterfaceByName("eth0")
	if err != nil {
		return "", fmt.Errorf("the real node needs eth0's address: %w", err)
	}
	addrs, err := iface.Addrs()
	if err != nil {
		return "", err
	}
	for _, a := range addrs {
		if ipnet, ok := a.(*net.IPNet); ok && ipnet.IP.To4() != nil {
			return ipnet.IP.String(), nil
		}
	}
	return "", errors.New("eth0 has no IPv4 address")
}

// prepareRealNode configures kube-apiserver for the real node before it
// starts: it listens on eth0 too and advertises that address (the
// `kubernetes` Service's endpoint), serves a certificate naming it and the
// Service's ClusterIP (in-cluster clients verify it), resolves webhook
// Services to their endpoints, and authenticates to the kubelet with a
// client certificate the kubelet trusts.
func (cp *ControlPlane) prepareRealNode(ip string) error {
	apiServer := cp.Env.ControlPlane.GetAPIServer()
	certDir := filepath.Join(cp.Dir, "apiserver-certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return err
	}
	serving, err := certs.SelfSigned([]string{"localhost", "127.0.0.1", ip, kubernetesServiceIP,
		"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}, 7*24*time.Hour)
	if err != nil {
		return err
	}
	// The service-account signer: envtest writes sa-signer.{key,crt} only
	// when it makes the serving certificate itself.
	signer, err := certs.SelfSigned([]string{"service-accounts"}, 7*24*time.Hour)
	if err != nil {
		return err
	}
	kubeletClient, err := certs.SelfSignedClient("kube-apiserver-kubelet-client", 7*24*time.Hour)
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{
		"apiserver.crt": serving.ServingCert, "apiserver.key": serving.ServingKey,
		"sa-signer.crt": signer.ServingCert, "sa-signer.key": signer.ServingKey,
		"kubelet-client.crt": kubeletClient.ClientCert, "kubelet-client.key": kubeletClient.ClientKey,
		"kubelet-client-ca.crt": kubeletClient.CACert,
	} {
		if err := os.WriteFile(filepath.Join(certDir, name), data, 0o600); err != nil {
			return err
		}
	}
	apiServer.CertDir = certDir
	apiServer.SecureServing.CA = serving.CACert
	args := apiServer.Configure()
	args.Set("bind-address", "0.0.0.0")
	args.Set("advertise-address", ip)
	args.Set("enable-aggregator-routing", "true")
	// envtest turns the ServiceAccount admission plugin off (no
	// service-account controller there); Pods on a kubelet need the
	// token volume it adds, and the controller runs in real-node mode.
	args.Set("disable-admission-plugins", "")
	args.Set("kubelet-client-certificate", filepath.Join(certDir, "kubelet-client.crt"))
	args.Set("kubelet-client-key", filepath.Join(certDir, "kubelet-client.key"))
	// The kubelet's serving certificate is self-signed (no CSR signer
	// runs): kube-apiserver connects without verifying it, as it does
	// when no --kubelet-certificate-authority is given.
	args.Set("kubelet-preferred-address-types", "InternalIP")
	return nil
}

// startRealNode brings up containerd and the kubelet once the control plane
// runs, and waits until the Node is Ready.
func (cp *ControlPlane) startRealNode(ctx context.Context, opts RealNodeOptions, ip string, kubelet string) (*RealNode, error) {
	if opts.Name == "" {
		opts.Name = "gatehouse-real-node"
	}
	if opts.PauseImage == "" {
		return nil, errors.New("real node: PauseImage is required (make pause-image)")
	}
	for _, bin := range []string{kubelet, "containerd", "runc", "ctr", "nft", filepath.Join(CNIBinDir, "bridge")} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("real node: %s not found (make tools builds the kubelet; apt-get install containerd runc containernetworking-plugins nftables): %w", bin, err)
		}
	}
	id := make([]byte, 3)
	_, _ = rand.Read(id)
	suffix := hex.EncodeToString(id)
	dir := filepath.Join(cp.Dir, "real-node")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	subnet, err := freePodSubnet()
	if err != nil {
		return nil, err
	}
	n := &RealNode{
		Name: opts.Name, IP: ip, PodCIDR: subnet, Dir: dir,
		ContainerdAddress: filepath.Join(dir, "containerd.sock"),
	}
	n.plan = cleanupPlan{
		Dir:        dir,
		CgroupRoot: "/gatehouse-" + suffix,
		Bridge:     "ghbr" + suffix,
		NftTable:   "gatehouse_" + suffix,
		Network:    "gatehouse-" + suffix,
	}
	// The janitor first: whatever happens from here on, a test binary that
	// dies leaves nothing behind.
	if err := n.startJanitor(); err != nil {
		return nil, err
	}
	fail := func(err error) (*RealNode, error) {
		_ = n.stop() // err is the cause
		return nil, fmt.Errorf("real node: %w (logs in %s)", err, dir)
	}
	if err := n.createBridge(); err != nil {
		return fail(err)
	}
	if err := n.writeCNIConfig(); err != nil {
		return fail(err)
	}
	if err := n.routeKubernetesService(cp.Env.ControlPlane.GetAPIServer().SecureServing.Port); err != nil {
		return fail(err)
	}
	if err := n.startContainerd(ctx, opts.PauseImage); err != nil {
		return fail(err)
	}
	for _, archive := range opts.Images {
		if err := n.ImportImage(ctx, archive); err != nil {
			return fail(err)
		}
	}
	if err := n.startKubelet(cp, kubelet); err != nil {
		return fail(err)
	}
	if err := n.waitReady(ctx, cp.Client, 2*time.Minute); err != nil {
		return fail(err)
	}
	return n, nil
}

// freePodSubnet picks a /24 in 10.244.0.0/16 that no route on the host
// covers yet, so that two harnesses on one machine never share one.
func freePodSubnet() (string, error) {
	out, err := exec.Command("ip", "-4", "route", "show").Output()
	if err != nil {
		return "", fmt.Errorf("ip route: %w", err)
	}
	b := make([]byte, 1)
	for range 64 {
		_, _ = rand.Read(b)
		subnet := fmt.Sprintf("10.244.%d.0/24", b[0])
		if !strings.Contains(string(out), subnet) {
			return subnet, nil
		}
	}
	return "", errors.New("no free /24 in 10.244.0.0/16")
}

// createBridge makes the bridge with its gateway address now rather than
// at the first Pod (the CNI plugin adopts it): the route to the /24 exists
// from the start, so that another harness's freePodSubnet skips it.
func (n *RealNode) createBridge() error {
	for _, args := range [][]string{
		{"link", "add", n.plan.Bridge, "type", "bridge"},
		{"addr", "add", n.gateway() + "/24", "dev", n.plan.Bridge},
		{"link", "set", n.plan.Bridge, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// gateway is the bridge's address in the Pod subnet.
func (n *RealNode) gateway() string {
	return strings.TrimSuffix(n.PodCIDR, "0/24") + "1"
}

// writeCNIConfig writes the one bridge network: host-local addresses with
// their state under Dir, the bridge as the Pods' default gateway (so that
// the host reaches Pods by IP and Pods reach the host), and no masquerade:
// no traffic leaves the host, so the plugin adds no iptables rules.
func (n *RealNode) writeCNIConfig() error {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       n.plan.Network,
		"plugins": []any{
			map[string]any{
				"type":             "bridge",
				"bridge":           n.plan.Bridge,
				"isGateway":        true,
				"isDefaultGateway": true,
				"ipMasq":           false,
				"hairpinMode":      true,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": filepath.Join(n.Dir, "cni-ipam"),
					"ranges":  []any{[]any{map[string]any{"subnet": n.PodCIDR, "gateway": n.gateway()}}},
				},
			},
			map[string]any{"type": "loopback"},
		},
	}
	b, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return err
	}
	confDir := filepath.Join(n.Dir, "cni-conf")
	if err := os.MkdirAll(confDir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(confDir, "10-gatehouse.conflist"), b, 0o600)
}

// routeKubernetesService gives Pods the `kubernetes` Service: a DNAT of
// its ClusterIP:443, for packets arriving from the bridge only, to
// kube-apiserver's port on the host, in an nftables table of its own that
// cleanup deletes whole. kube-proxy would own cluster-wide chains instead,
// which two harnesses on one host would fight over (docs/real-node.md).
func (n *RealNode) routeKubernetesService(apiServerPort string) error {
	rules := fmt.Sprintf(`table ip %s {
	chain prerouting {
		type nat hook prerouting priority dstnat; policy accept;
		iifname %q ip daddr %s tcp dport 443 dnat to %s:%s
	}
}
`, n.plan.NftTable, n.plan.Bridge, kubernetesServiceIP, n.IP, apiServerPort)
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft: %w: %s", err, out)
	}
	return nil
}

const containerdConfig = `version = 2
root = %[1]q
state = %[2]q
# The snapshotters the CRI does not use would only probe the host.
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]

[grpc]
  address = %[3]q

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = %[4]q
  # The tasks service needs the v1 runtime loaded; its root too stays
  # under the work directory.
  [plugins."io.containerd.runtime.v1.linux"]
    runtime_root = %[9]q
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = %[5]q
    # This machine refuses to lower a process's oom_score_adj; the CRI
    # gives the sandbox -998 otherwise and runc fails.
    restrict_oom_score_adj = true
    # The Pods' network namespaces under state, not /var/run/netns.
    netns_mounts_under_state_dir = true
    enable_selinux = false
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          Root = %[6]q
          SystemdCgroup = false
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = %[7]q
      conf_dir = %[8]q
      max_conf_num = 1
`

func (n *RealNode) startContainerd(ctx context.Context, pauseImage string) error {
	path := filepath.Join(n.Dir, "containerd.toml")
	config := fmt.Sprintf(containerdConfig,
		filepath.Join(n.Dir, "containerd-root"), filepath.Join(n.Dir, "containerd-state"), n.ContainerdAddress,
		filepath.Join(n.Dir, "containerd-opt"), pauseImage, filepath.Join(n.Dir, "runc"),
		CNIBinDir, filepath.Join(n.Dir, "cni-conf"), filepath.Join(n.Dir, "runc-v1"))
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		return err
	}
	c, err := startComponent("containerd", "containerd", []string{"--config", path}, filepath.Join(n.Dir, "containerd.log"))
	if err != nil {
		return err
	}
	n.containerd = c
	deadline := time.Now().Add(time.Minute)
	for {
		err := exec.CommandContext(ctx, "ctr", "--address", n.ContainerdAddress, "version").Run()
		if err == nil {
			return nil
		}
		select {
		case <-c.exited:
			return fmt.Errorf("containerd exited (%v):\n%s", c.waitErr, c.logTail())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("containerd not serving after a minute:\n%s", c.logTail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# cgroup v1 here; unsupported by default since 1.35.
failCgroupV1: false
cgroupDriver: cgroupfs
# Pod cgroups under a root of their own, which cleanup empties and removes.
cgroupRoot: %[1]q
containerRuntimeEndpoint: %[2]q
address: %[3]q
port: %[4]d
healthzBindAddress: 127.0.0.1
healthzPort: %[5]d
readOnlyPort: 0
podLogsDir: %[6]q
# Only kube-apiserver, by the client certificate it presents (logs,
# exec), may call the kubelet's API.
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: %[7]q
authorization:
  mode: AlwaysAllow
registerNode: true
registerWithTaints:
- key: %[8]q
  value: "true"
  effect: NoSchedule
# The machine's disk and memory figures are not the node's to defend;
# cadvisor inside this VM finds no root filesystem either.
evictionHard:
  memory.available: 1Mi
  nodefs.available: 1%%
  imagefs.available: 1%%
  nodefs.inodesFree: 1%%
# The imported images cannot be pulled again: never collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
failSwapOn: false
resolvConf: /etc/resolv.conf
syncFrequency: 10s
fileCheckFrequency: 10s
nodeStatusUpdateFrequency: 5s
serializeImagePulls: false
`

func (n *RealNode) startKubelet(cp *ControlPlane, kubelet string) error {
	// The kubelet acts as a cluster admin: it reads the Secrets and
	// ConfigMaps its Pods mount without a Node authorizer, which the
	// harness's kube-apiserver does not run.
	user, err := cp.Env.AddUser(envtest.User{Name: "system:node:" + n.Name, Groups: []string{"system:masters", "system:nodes"}}, nil)
	if err != nil {
		return err
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return err
	}
	kubeconfigPath := filepath.Join(n.Dir, "kubelet.kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		return err
	}
	port, err := FreePort()
	if err != nil {
		return err
	}
	healthzPort, err := FreePort()
	if err != nil {
		return err
	}
	configPath := filepath.Join(n.Dir, "kubelet.yaml")
	clientCA := filepath.Join(cp.Env.ControlPlane.GetAPIServer().CertDir, "kubelet-client-ca.crt")
	config := fmt.Sprintf(kubeletConfig, n.plan.CgroupRoot, "unix://"+n.ContainerdAddress, n.IP, port, healthzPort,
		filepath.Join(n.Dir, "pod-logs"), clientCA, RealNodeTaint)
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		return err
	}
	// The kubelet checks that its cgroup root exists in every hierarchy.
	if err := forEachCgroupHierarchy(func(hierarchy string) error {
		return os.MkdirAll(filepath.Join(hierarchy, n.plan.CgroupRoot), 0o755)
	}); err != nil {
		return err
	}
	c, err := startComponent("kubelet", kubelet, []string{
		"--config=" + configPath,
		"--kubeconfig=" + kubeconfigPath,
		"--root-dir=" + filepath.Join(n.Dir, "kubelet"),
		"--cert-dir=" + filepath.Join(n.Dir, "kubelet-pki"),
		"--hostname-override=" + n.Name,
		"--node-ip=" + n.IP,
		"--node-labels=" + RealNodeLabel + "=true",
		"--v=2",
	}, filepath.Join(n.Dir, "kubelet.log"))
	if err != nil {
		return err
	}
	n.kubelet = c
	return nil
}

func (n *RealNode) waitReady(ctx context.Context, c client.Client, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := "not registered"
	for {
		var node corev1.Node
		if err := c.Get(ctx, types.NamespacedName{Name: n.Name}, &node); err == nil {
			last = "no Ready condition"
			for _, cond := range node.Status.Conditions {
				if cond.Type == corev1.NodeReady {
					if cond.Status == corev1.ConditionTrue {
						return nil
					}
					last = cond.Reason + ": " + cond.Message
				}
			}
		}
		select {
		case <-n.kubelet.exited:
			return fmt.Errorf("kubelet exited (%v):\n%s", n.kubelet.waitErr, n.kubelet.logTail())
		case <-n.containerd.exited:
			return fmt.Errorf("containerd exited (%v):\n%s", n.containerd.waitErr, n.containerd.logTail())
		case <-ctx.Done():
			return fmt.Errorf("node %s not Ready after %s (%s); kubelet log:\n%s", n.Name, timeout, last, n.kubelet.logTail())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// ImportImage imports an image archive (OCI or Docker) into containerd's
// k8s.io namespace, where the kubelet finds it: e.g. a second Gatehouse
// image for an upgrade.
func (n *RealNode) ImportImage(ctx context.Context, archive string) error {
	if out, err := exec.CommandContext(ctx, "ctr", "--address", n.ContainerdAddress, "-n", "k8s.io", "images", "import", archive).CombinedOutput(); err != nil {
		return fmt.Errorf("import %s: %w: %s", archive, err, out)
	}
	return nil
}

// Images lists the image references containerd holds for the CRI.
func (n *RealNode) Images(ctx context.Context) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ctr", "--address", n.ContainerdAddress, "-n", "k8s.io", "images", "ls", "-q").Output()
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(out)), nil
}

// stop tears the node down in order: the kubelet, then every Pod sandbox
// through the CRI (its containers, network and mounts), then containerd;
// the janitor then removes what is left (processes, mounts, cgroups, the
// bridge, the nftables table, the directory) and exits.
func (n *RealNode) stop() error {
	var errs []error
	if n.kubelet != nil {
		if err := n.kubelet.stop(30 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	if n.containerd != nil {
		select {
		case <-n.containerd.exited:
		default:
			if err := stopPodSandboxes(n.ContainerdAddress); err != nil {
				errs = append(errs, err)
			}
		}
		if err := n.containerd.stop(30 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	if err := n.stopJanitor(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ImageArchiveRef returns the reference an image archive names: the
// io.containerd.image.name (or org.opencontainers.image.ref.name)
// annotation of an OCI archive's index, or the first RepoTags entry of a
// Docker archive's manifest.json; ctr imports it under that name.
func ImageArchiveRef(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return "", fmt.Errorf("%s: no index.json or manifest.json naming the image", path)
		}
		if err != nil {
			return "", fmt.Errorf("%s: %w", path, err)
		}
		switch strings.TrimPrefix(h.Name, "./") {
		case "index.json":
			var index struct {
				Manifests []struct {
					Annotations map[string]string `json:"annotations"`
				} `json:"manifests"`
			}
			if err := json.NewDecoder(tr).Decode(&index); err != nil {
				return "", fmt.Errorf("%s: index.json: %w", path, err)
			}
			for _, m := range index.Manifests {
				for _, key := range []string{"io.containerd.image.name", "org.opencontainers.image.ref.name"} {
					if ref := m.Annotations[key]; strings.Contains(ref, "/") {
						return ref, nil
					}
				}
			}
		case "manifest.json":
			var manifest []struct {
				RepoTags []string `json:"RepoTags"`
			}
			if err := json.NewDecoder(tr).Decode(&manifest); err != nil {
				return "", fmt.Errorf("%s: manifest.json: %w", path, err)
			}
			if len(manifest) > 0 && len(manifest[0].RepoTags) > 0 {
				return manifest[0].RepoTags[0], nil
			}
		}
	}
}
