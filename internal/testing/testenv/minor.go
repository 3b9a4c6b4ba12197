package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"k8s.io/client-go/discovery"
)

// KubeMinorEnv names the environment variable that picks the Kubernetes
// minor the control plane runs: "1.34" starts bin/kube-1.34/'s kube-apiserver,
// kube-controller-manager, kube-scheduler and kubelet (make tools-minors
// builds them from hack/tools/kube-1.34). Unset, the control plane runs
// bin/'s own, the minor hack/tools/kube pins. The same tests run on every
// minor (make test-minors, docs/testing.md).
const KubeMinorEnv = "GATEHOUSE_KUBE_MINOR"

// minorPattern is what KubeMinorEnv may hold: a minor, nothing that could
// name another directory.
var minorPattern = regexp.MustCompile(`^1\.[0-9]{1,3}$`)

// versionedBinaries are the Kubernetes binaries whose minor the control
// plane varies. etcd is every minor's (each supports etcd 3.5 and 3.6) and
// kubectl is a client the tests drive: both stay bin/'s.
var versionedBinaries = map[string]bool{
	"kube-apiserver": true, "kube-controller-manager": true, "kube-scheduler": true, "kubelet": true,
}

// KubeMinor is the minor KubeMinorEnv asks for, or "" for bin/'s own. A
// value that is not a minor is an error, not a silent default: a matrix
// run must never test 1.37 while it says 1.34.
func KubeMinor() (string, error) {
	m := os.Getenv(KubeMinorEnv)
	if m == "" || minorPattern.MatchString(m) {
		return m, nil
	}
	return "", fmt.Errorf("%s=%q: want a Kubernetes minor such as 1.34", KubeMinorEnv, m)
}

// kubeBinary is the path of the named binary in assets (bin/) for the minor
// KubeMinor selects, and tells how to build it when it is missing.
func kubeBinary(assets, name string) (string, error) {
	minor, err := KubeMinor()
	if err != nil {
		return "", err
	}
	dir, build := assets, "make tools (make test does it)"
	if minor != "" && versionedBinaries[name] {
		dir, build = filepath.Join(assets, "kube-"+minor), "make tools-minors (make test-minors does it)"
	}
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s not found in %s: run `%s`", name, dir, build)
	}
	return path, nil
}

// checkServerVersion reads the started kube-apiserver's version into
// cp.ServerVersion and fails when its minor is not the one KubeMinorEnv asked
// for: a binary built from the wrong module would otherwise pass a matrix
// run as a minor it is not.
func (cp *ControlPlane) checkServerVersion() error {
	dc, err := discovery.NewDiscoveryClientForConfig(cp.Config)
	if err != nil {
		return err
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return fmt.Errorf("kube-apiserver version: %w", err)
	}
	cp.ServerVersion = v
	minor, err := KubeMinor()
	if err != nil {
		return err
	}
	if minor != "" && v.Major+"."+strings.TrimSuffix(v.Minor, "+") != minor {
		return fmt.Errorf("%s=%s but %s reports %s (%s.%s): rebuild it with make tools-minors", KubeMinorEnv, minor, cp.binaries["kube-apiserver"], v.GitVersion, v.Major, v.Minor)
	}
	return nil
}
