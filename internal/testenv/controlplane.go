package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
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

// ControlPlane is a running etcd and kube-apiserver.
type ControlPlane struct {
	Env    *envtest.Environment
	Config *rest.Config
	Client client.Client
	Scheme *runtime.Scheme
}

// ControlPlaneOptions configures StartControlPlane.
type ControlPlaneOptions struct {
	// CRDPaths are directories or files of CRDs to install, relative to the
	// repository root. Default: config/crd/bases when it exists.
	CRDPaths []string
	// AddToScheme registers extra types on the client's scheme.
	AddToScheme []func(*runtime.Scheme) error
}

// StartControlPlane starts etcd and kube-apiserver from bin/. A missing binary
// is an error telling how to build it: tests never skip for it.
func StartControlPlane(opts ControlPlaneOptions) (*ControlPlane, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	assets := filepath.Join(root, "bin")
	for _, bin := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(assets, bin)); err != nil {
			return nil, fmt.Errorf("%s not found in %s: run `make tools` (make test does it)", bin, assets)
		}
	}
	paths := opts.CRDPaths
	if paths == nil {
		if _, err := os.Stat(filepath.Join(root, "config/crd/bases")); err == nil {
			paths = []string{"config/crd/bases"}
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
	env := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		CRDDirectoryPaths:        paths,
		ErrorIfCRDPathMissing:    true,
		Scheme:                   scheme,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	return &ControlPlane{Env: env, Config: cfg, Client: c, Scheme: scheme}, nil
}

// Stop stops kube-apiserver and etcd.
func (cp *ControlPlane) Stop() error { return cp.Env.Stop() }

// AdminKubeconfig returns a kubeconfig for a system:masters user.
func (cp *ControlPlane) AdminKubeconfig() ([]byte, error) {
	user, err := cp.Env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, err
	}
	return user.KubeConfig()
}
