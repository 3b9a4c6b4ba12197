package install

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/internal/testenv"
)

// The suite's one control plane with the real node, shared by every test
// of the package (they run in order: each leaves the cluster as the next
// expects it).
var (
	cluster        *testenv.ControlPlane
	kubeconfigPath string
	workDir        string
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) (code int) {
	root, err := testenv.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	images := []string{filepath.Join(root, "bin", "gatehouse-image.tar"), filepath.Join(root, "bin", "pause-image.tar")}
	for _, img := range images {
		if _, err := os.Stat(img); err != nil {
			fmt.Fprintf(os.Stderr, "%s not found: run `make image pause-image` (make test-install does it)\n", img)
			return 1
		}
	}
	chart, err := os.ReadFile(filepath.Join(root, "charts", "gatehouse", "Chart.yaml"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var appVersion string
	for _, line := range strings.Split(string(chart), "\n") {
		if v, ok := strings.CutPrefix(line, "appVersion: "); ok {
			appVersion = strings.TrimSpace(v)
		}
	}
	if workDir, err = os.MkdirTemp("", "gatehouse-install-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cluster, err = testenv.StartControlPlane(testenv.ControlPlaneOptions{
		// The chart installs the CRDs of the modules it enables; the
		// harness only those of other projects (Flux's HelmRelease).
		CRDPaths: []string{"config/crd/external"},
		Dir:      filepath.Join(workDir, "cluster"),
		RealNode: &testenv.RealNodeOptions{PauseImage: "gatehouse.dev/pause:" + appVersion, Images: images},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start the control plane and the real node:", err)
		return 1
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop:", err)
			code = 1
		}
		if code == 0 {
			_ = os.RemoveAll(workDir)
		} else {
			fmt.Fprintln(os.Stderr, "logs of the control plane, the real node and the helm values are kept in", workDir)
		}
	}()
	kubeconfig, err := cluster.AdminKubeconfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	kubeconfigPath = filepath.Join(workDir, "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}
