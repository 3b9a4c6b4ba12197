//go:build linux

package testenv

import (
	"archive/tar"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeTar(t *testing.T, files map[string]string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "image.tar")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := tar.NewWriter(f)
	for name, body := range files {
		if err := w.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// ImageArchiveRef names the image as ctr images import does: the
// containerd annotation of an OCI index, else a Docker archive's tag; a bare
// tag in org.opencontainers.image.ref.name is no reference.
func TestImageArchiveRef(t *testing.T) {
	for name, tc := range map[string]struct {
		files map[string]string
		want  string
	}{
		"oci":          {files: map[string]string{"oci-layout": `{}`, "index.json": `{"manifests":[{"annotations":{"io.containerd.image.name":"gatehouse.dev/pause:0.1.0","org.opencontainers.image.ref.name":"0.1.0"}}]}`}, want: "gatehouse.dev/pause:0.1.0"},
		"oci ref.name": {files: map[string]string{"./index.json": `{"manifests":[{"annotations":{"org.opencontainers.image.ref.name":"ghcr.io/gatehouse-dev/gatehouse:1"}}]}`}, want: "ghcr.io/gatehouse-dev/gatehouse:1"},
		"docker":       {files: map[string]string{"manifest.json": `[{"RepoTags":["ghcr.io/gatehouse-dev/gatehouse:dev"]}]`}, want: "ghcr.io/gatehouse-dev/gatehouse:dev"},
		"bare tag":     {files: map[string]string{"index.json": `{"manifests":[{"annotations":{"org.opencontainers.image.ref.name":"0.1.0"}}]}`}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := ImageArchiveRef(writeTar(t, tc.files))
			if tc.want == "" {
				if err == nil || !strings.Contains(err.Error(), "no index.json or manifest.json naming the image") {
					t.Fatalf("got %q, %v; want the error naming what is missing", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// The janitor finds mounts by mountinfo's escaped paths: a dir with a space
// (a user's checkout for make run) must still match.
func TestUnescapeMountPath(t *testing.T) {
	for in, want := range map[string]string{
		`/tmp/a`:                "/tmp/a",
		`/home/me/my\040repo/x`: "/home/me/my repo/x",
		`/a\011b\012c\134d`:     "/a\tb\nc\\d",
		`/trailing\04`:          `/trailing\04`,
	} {
		if got := unescapeMountPath(in); got != want {
			t.Errorf("unescapeMountPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// owns matches the node's processes by command line and cgroup, and no
// other harness's: the plans differ in their directory and cgroup root.
func TestCleanupPlanOwnsItsProcessesOnly(t *testing.T) {
	plan := cleanupPlan{Dir: "/tmp/cp-1/real-node", CgroupRoot: "/gatehouse-abc123"}
	proc := t.TempDir()
	write := func(pid, cmdline, cgroup string) {
		dir := filepath.Join(proc, pid)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		_ = os.WriteFile(filepath.Join(dir, "cmdline"), []byte(strings.ReplaceAll(cmdline, " ", "\x00")), 0o644)
		_ = os.WriteFile(filepath.Join(dir, "cgroup"), []byte(cgroup), 0o644)
	}
	write("1", "/usr/bin/containerd-shim-runc-v2 -namespace k8s.io -id x -address /tmp/cp-1/real-node/containerd.sock", "4:memory:/\n")
	write("2", "/pause", "4:memory:/gatehouse-abc123/kubepods/besteffort/pod1/c1\n3:cpu:/gatehouse-abc123/kubepods\n")
	write("3", "/usr/bin/containerd-shim-runc-v2 -address /tmp/cp-2/real-node/containerd.sock", "4:memory:/\n")
	write("4", "/pause", "4:memory:/gatehouse-abc1234/kubepods\n")
	write("5", "/usr/bin/containerd --config /tmp/cp-1/real-node-other/containerd.toml", "0::/\n")
	for pid, want := range map[string]bool{"1": true, "2": true, "3": false, "4": false, "5": false} {
		if got := plan.ownsIn(filepath.Join(proc, pid)); got != want {
			t.Errorf("process %s: owns = %v, want %v", pid, got, want)
		}
	}
}
