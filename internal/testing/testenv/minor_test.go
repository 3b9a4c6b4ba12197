package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The minor picks the API server, controller manager, scheduler and kubelet
// from bin/kube-<minor>/ and leaves etcd bin/'s; a value that is not a minor
// names no directory and is an error, never bin/'s default.
func TestKubeBinaryFollowsTheMinor(t *testing.T) {
	assets := t.TempDir()
	for _, p := range []string{"etcd", "kube-apiserver", "kube-1.34/kube-apiserver", "kube-1.34/kubelet"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(assets, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(assets, p), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		minor, name, want, err string
	}{
		{"", "kube-apiserver", "kube-apiserver", ""},
		{"1.34", "kube-apiserver", "kube-1.34/kube-apiserver", ""},
		{"1.34", "kubelet", "kube-1.34/kubelet", ""},
		{"1.34", "etcd", "etcd", ""},
		{"1.34", "kube-scheduler", "", "make tools-minors"},
		{"1.35", "kube-apiserver", "", "make tools-minors"},
		{"", "kube-scheduler", "", "make tools "},
		{"../1.34", "kube-apiserver", "", "want a Kubernetes minor"},
		{"1.34/..", "kube-apiserver", "", "want a Kubernetes minor"},
		{"v1.34", "kube-apiserver", "", "want a Kubernetes minor"},
	} {
		t.Setenv(KubeMinorEnv, tc.minor)
		got, err := kubeBinary(assets, tc.name)
		switch {
		case tc.err == "" && (err != nil || got != filepath.Join(assets, tc.want)):
			t.Errorf("%s=%q %s: %q, %v; want %q", KubeMinorEnv, tc.minor, tc.name, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s=%q %s: %q, %v; want an error saying %q", KubeMinorEnv, tc.minor, tc.name, got, err, tc.err)
		}
	}
}
