// Package install tests Gatehouse as it is installed: its image run by a
// real kubelet (containerd, runc, CNI) on a Node beside the harness's fake
// ones, called by kube-apiserver through Services (docs/real-node.md).
package install

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

// controlPlane is shared by the package's tests; its RealNode runs the
// Pods that tolerate it (testenv.PlaceOnRealNode).
var controlPlane *testenv.ControlPlane

// gatehouseImage is the reference of the Gatehouse image imported into the
// real node (bin/gatehouse-image.tar, make image).
var gatehouseImage string

// imageArchives are what `make image` and `make pause-image` write; each
// can be replaced through the environment (GATEHOUSE_IMAGE_ARCHIVE,
// PAUSE_IMAGE_ARCHIVE). The references are read from the archives.
func imageArchives() (gatehouse, pause string, err error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", "", err
	}
	gatehouse = os.Getenv("GATEHOUSE_IMAGE_ARCHIVE")
	if gatehouse == "" {
		gatehouse = filepath.Join(root, "bin", "gatehouse-image.tar")
	}
	pause = os.Getenv("PAUSE_IMAGE_ARCHIVE")
	if pause == "" {
		pause = filepath.Join(root, "bin", "pause-image.tar")
	}
	for _, p := range []string{gatehouse, pause} {
		if _, err := os.Stat(p); err != nil {
			return "", "", fmt.Errorf("%s: run `make image pause-image` (make test-install does it)", p)
		}
	}
	return gatehouse, pause, nil
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	gatehouseArchive, pauseArchive, err := imageArchives()
	if err != nil {
		fmt.Fprintln(os.Stderr, "install:", err)
		return 1
	}
	pauseImage, err = testenv.ImageArchiveRef(pauseArchive)
	if err == nil {
		gatehouseImage, err = testenv.ImageArchiveRef(gatehouseArchive)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "install:", err)
		return 1
	}
	images := []string{pauseArchive, gatehouseArchive}
	if dist := os.Getenv(releaseDistEnv); dist != "" {
		if published, err = publishRelease(dist); err != nil {
			fmt.Fprintln(os.Stderr, "install:", err)
			return 1
		}
		defer published.server.Close()
		gatehouseImage = published.repository + ":" + published.version
		images = []string{pauseArchive}
	}
	cp, err := testenv.StartControlPlane(testenv.ControlPlaneOptions{
		// The chart installs the CRDs of the modules it enables (and must
		// leave another owner's alone); the harness only other projects'.
		CRDPaths: []string{"config/crd/external"},
		RealNode: &testenv.RealNodeOptions{PauseImage: pauseImage, Images: images},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "install:", err)
		return 1
	}
	controlPlane = cp
	code := m.Run()
	// helm's state, values files and the kubeconfig (helpers_test.go).
	if suite.dir != "" {
		_ = os.RemoveAll(suite.dir)
	}
	if err := cp.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "install: stop control plane:", err)
		code = 1
	}
	return code
}
