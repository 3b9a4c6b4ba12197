package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The real image's layout, built here as make image builds it: from
// gatehouse.args, the checked-in locks and the packages they pin (kept in
// the repository's bin/debs, as make image keeps them, so that they are
// downloaded once), around a stand-in Gatehouse binary: this test's own
// executable, a Go binary whose modules the SBOM must name.
func realOptions(t *testing.T) options {
	t.Helper()
	args, err := expandArgFiles([]string{"@gatehouse.args"})
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	o := options{
		Ref:         testRef,
		Output:      filepath.Join(dir, "image.tar"),
		IndexOutput: filepath.Join(dir, "image.oci.tar"),
		Listing:     filepath.Join(dir, "contents.txt"),
		SBOM:        filepath.Join(dir, "sbom.spdx.json"),
		Files:       listFlag{"/usr/local/bin/gatehouse=" + self},
		Platforms:   listFlag{"linux/amd64", "linux/arm64"},
		DebCache:    filepath.Join("..", "..", "bin", "debs"),
		WorkDir:     "/",
		Epoch:       1700000000,
	}
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		switch k {
		case "--deb":
			o.Debs = append(o.Debs, v)
		case "--ca-bundle":
			o.CABundle = v
		case "--deb-lock":
			// Relative to the repository, where make runs.
			o.DebLock = filepath.Join("..", "..", v)
		case "--dir":
			o.Dirs = append(o.Dirs, v)
		case "--user":
			o.User = v
		case "--entrypoint":
			o.Entry = append(o.Entry, v)
		case "--env":
			o.Env = append(o.Env, v)
		case "--label":
			o.Labels = append(o.Labels, v)
		default:
			t.Fatalf("gatehouse.args: %s is new to this test", a)
		}
	}
	return o
}

// The real image, both platforms with every output, is the costliest
// thing these tests make (each platform's packages unpacked from xz, its
// layer compressed at gzip's best level around this multi-megabyte test
// binary), so it is built once for the tests that only read it
// (TestImageIndexCarriesThePinnedPackages, TestCosignSignsAndVerifiesTheIndex),
// in a directory TestMain removes.
var (
	realOnce  sync.Once
	realDir   string
	realBuilt options
	realErr   error
)

// realBuild is realOptions' image built once: the options name its outputs.
func realBuild(t *testing.T) options {
	t.Helper()
	o := realOptions(t)
	realOnce.Do(func() {
		if realDir, realErr = os.MkdirTemp("", "gatehouse-image-test-"); realErr != nil {
			return
		}
		o.Output = filepath.Join(realDir, "image.tar")
		o.IndexOutput = filepath.Join(realDir, "image.oci.tar")
		o.Listing = filepath.Join(realDir, "contents.txt")
		o.SBOM = filepath.Join(realDir, "sbom.spdx.json")
		realBuilt, realErr = o, run(o, io.Discard)
	})
	if realErr != nil {
		t.Fatal(realErr)
	}
	return realBuilt
}

func TestMain(m *testing.M) {
	code := m.Run()
	if realDir != "" {
		_ = os.RemoveAll(realDir)
	}
	os.Exit(code)
}

var elfMachine = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// layerFiles reads a gzip layer blob into entries by absolute path.
func layerFiles(t *testing.T, blob []byte) *rootfs {
	t.Helper()
	rfs := newRootfs()
	zr, err := gzip.NewReader(bytes.NewReader(blob))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return rfs
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		rfs.entries[path.Clean("/"+h.Name)] = entry{Path: path.Clean("/" + h.Name), Type: h.Typeflag, Mode: h.Mode, Data: data, Target: h.Linkname}
	}
}

// TestImageIndexCarriesThePinnedPackages: make image's index holds one
// image per platform; each layer's haproxy is the pinned package's file
// for that architecture (its bytes, its ELF machine, its version string),
// every library any ELF file in the layer needs resolves inside the layer
// to a file of a pinned package of the same architecture, and no library
// is there that nothing needs; the single-platform archive (what the local
// containerd imports) is the index's image for this machine's platform;
// the listing and the SBOM name the pinned haproxy of each architecture.
func TestImageIndexCarriesThePinnedPackages(t *testing.T) {
	o := realBuild(t)
	data, err := os.ReadFile(o.IndexOutput)
	if err != nil {
		t.Fatal(err)
	}
	a := readArchive(t, data)
	var top v1.IndexManifest
	if err := json.Unmarshal(a["index.json"], &top); err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != "application/vnd.oci.image.index.v1+json" ||
		top.Manifests[0].Annotations[annotationContainerdName] != testRef {
		t.Fatalf("index.json %s: want one image index named %s", a["index.json"], testRef)
	}
	var idx v1.IndexManifest
	if err := json.Unmarshal(a.blob(t, top.Manifests[0].Digest), &idx); err != nil {
		t.Fatal(err)
	}
	var platforms []string
	manifests := map[string]v1.Hash{}
	for _, d := range idx.Manifests {
		platforms = append(platforms, d.Platform.String())
		manifests[d.Platform.Architecture] = d.Digest
	}
	if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Fatalf("index platforms %v", platforms)
	}

	listing, err := os.ReadFile(o.Listing)
	if err != nil {
		t.Fatal(err)
	}
	for arch, digest := range manifests {
		t.Run(arch, func(t *testing.T) {
			lock, err := readLock(lockPath(o.DebLock, arch))
			if err != nil {
				t.Fatal(err)
			}
			locked := map[string]lockEntry{}
			for _, e := range lock {
				locked[e.Package] = e
			}
			haproxy, ok := locked["haproxy"]
			if !ok {
				t.Fatal("haproxy is not locked")
			}
			pkg, err := debCache{o.DebCache}.fetch(haproxy)
			if err != nil {
				t.Fatal(err)
			}

			var m v1.Manifest
			if err := json.Unmarshal(a.blob(t, digest), &m); err != nil {
				t.Fatal(err)
			}
			var cf v1.ConfigFile
			if err := json.Unmarshal(a.blob(t, m.Config.Digest), &cf); err != nil {
				t.Fatal(err)
			}
			if cf.Architecture != arch || cf.OS != "linux" {
				t.Errorf("config platform %s/%s", cf.OS, cf.Architecture)
			}
			rfs := layerFiles(t, a.blob(t, m.Layers[0].Digest))
			got := rfs.entries["/usr/sbin/haproxy"]
			if !bytes.Equal(got.Data, pkg.Files["/usr/sbin/haproxy"].Data) {
				t.Fatal("/usr/sbin/haproxy is not the pinned package's file")
			}
			if !bytes.Contains(got.Data, []byte(haproxy.Version)) {
				t.Errorf("/usr/sbin/haproxy does not carry its version %s", haproxy.Version)
			}

			// Every ELF file's needs, from its headers, resolved in the
			// layer, of this architecture.
			needed := map[string]bool{}
			for _, e := range rfs.entries {
				if e.Mode&0o6000 != 0 {
					t.Errorf("%s is setuid or setgid", e.Path)
				}
				if e.Type != tar.TypeReg {
					continue
				}
				f, err := elf.NewFile(bytes.NewReader(e.Data))
				if err != nil {
					continue
				}
				if _, err := buildinfo.Read(bytes.NewReader(e.Data)); err == nil {
					continue // the stand-in Gatehouse (this machine's; static)
				}
				if f.Machine != elfMachine[arch] {
					t.Errorf("%s is for %s", e.Path, f.Machine)
				}
				libs, _ := f.ImportedLibraries()
				if interp := elfInterpreter(f); interp != "" {
					libs = append(libs, interp)
				}
				for _, lib := range libs {
					found := false
					for _, d := range append([]string{""}, libraryDirs(arch)...) {
						if real, ok := resolveIn(rfs, path.Join(d, lib)); ok && (d != "" || path.IsAbs(lib)) {
							needed[real] = true
							found = true
							break
						}
					}
					if !found {
						t.Errorf("%s needs %s: not in the image", e.Path, lib)
					}
				}
			}
			for _, e := range rfs.entries {
				if e.Type == tar.TypeReg && strings.Contains(e.Path, ".so") && !needed[e.Path] {
					t.Errorf("%s is in the image but no program or library needs it", e.Path)
				}
			}
			if len(needed) < 5 {
				t.Errorf("haproxy needs only %v?", needed)
			}
			if want := "haproxy " + haproxy.Version + " " + arch + " " + haproxy.SHA256; !bytes.Contains(listing, []byte(want)) {
				t.Errorf("the listing has no line %q", want)
			}
		})
	}

	// The archive the local containerd imports is this machine's image of
	// the index (or the first's, on another architecture).
	local := readArchive(t, mustRead(t, o.Output))
	desc, _, _ := local.image(t)
	want := manifests[runtime.GOARCH]
	if _, ok := elfMachine[runtime.GOARCH]; !ok {
		want = idx.Manifests[0].Digest
	}
	if desc.Digest != want {
		t.Errorf("the single-platform archive holds %s, the index's %s image is %s", desc.Digest, runtime.GOARCH, want)
	}

	checkSBOM(t, o, top.Manifests[0].Digest)
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkSBOM validates what SPDX 2.3 requires of the document and of each
// package (https://spdx.github.io/spdx-spec/v2.3/), and that it names
// each architecture's pinned haproxy and the Go modules of the binary.
func checkSBOM(t *testing.T, o options, index v1.Hash) {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(mustRead(t, o.SBOM), &doc); err != nil {
		t.Fatal(err)
	}
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	for k, want := range map[string]string{"spdxVersion": "SPDX-2.3", "dataLicense": "CC0-1.0", "SPDXID": "SPDXRef-DOCUMENT"} {
		if got := str(doc, k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if str(doc, "name") == "" || !strings.HasPrefix(str(doc, "documentNamespace"), "https://") || !strings.Contains(str(doc, "documentNamespace"), index.Hex) {
		t.Errorf("name %q, documentNamespace %q: want a name and a unique URI (the index digest)", str(doc, "name"), str(doc, "documentNamespace"))
	}
	ci, _ := doc["creationInfo"].(map[string]any)
	if _, err := time.Parse(time.RFC3339, str(ci, "created")); err != nil || str(ci, "created") != "2023-11-14T22:13:20Z" {
		t.Errorf("creationInfo.created %q: want SOURCE_DATE_EPOCH in RFC 3339", str(ci, "created"))
	}
	if creators, _ := ci["creators"].([]any); len(creators) == 0 {
		t.Error("creationInfo.creators is empty")
	}
	idPattern := regexp.MustCompile(`^SPDXRef-[A-Za-z0-9.-]+$`)
	ids := map[string]bool{"SPDXRef-DOCUMENT": true}
	purls := map[string]bool{}
	pkgs, _ := doc["packages"].([]any)
	for _, p := range pkgs {
		pm, _ := p.(map[string]any)
		id := str(pm, "SPDXID")
		if !idPattern.MatchString(id) || ids[id] {
			t.Errorf("package %q: SPDXID %q is malformed or not unique", str(pm, "name"), id)
		}
		ids[id] = true
		if str(pm, "name") == "" || str(pm, "downloadLocation") == "" {
			t.Errorf("package %s lacks name or downloadLocation", id)
		}
		for _, k := range []string{"licenseConcluded", "licenseDeclared", "copyrightText"} {
			if str(pm, k) == "" {
				t.Errorf("package %s lacks %s", id, k)
			}
		}
		refs, _ := pm["externalRefs"].([]any)
		for _, r := range refs {
			rm, _ := r.(map[string]any)
			if str(rm, "referenceType") == "purl" {
				purls[str(rm, "referenceLocator")] = true
			}
		}
	}
	described, _ := doc["documentDescribes"].([]any)
	if len(described) != 1 || !ids[described[0].(string)] {
		t.Errorf("documentDescribes %v", described)
	}
	rels, _ := doc["relationships"].([]any)
	for _, r := range rels {
		rm, _ := r.(map[string]any)
		if !ids[str(rm, "spdxElementId")] || !ids[str(rm, "relatedSpdxElement")] || str(rm, "relationshipType") == "" {
			t.Errorf("relationship %v names an unknown element", rm)
		}
	}
	for _, arch := range []string{"amd64", "arm64"} {
		lock, err := readLock(lockPath(o.DebLock, arch))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range lock {
			if e.Package != "haproxy" {
				continue
			}
			want := "pkg:deb/debian/haproxy@" + strings.ReplaceAll(e.Version, "+", "%2B") + "?arch=" + arch + "&distro=debian-" + debianRelease
			if !purls[want] {
				t.Errorf("the SBOM has no %s", want)
			}
		}
	}
	self, _ := os.Executable()
	info, err := buildinfo.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range info.Deps {
		if d.Path == "github.com/google/go-containerregistry" {
			if want := "pkg:golang/github.com/google/go-containerregistry@" + d.Version; !purls[want] {
				t.Errorf("the SBOM has no %s", want)
			}
		}
	}
}

// TestHaproxyRunsFromTheImageFiles: each image architecture's files alone
// (no file of this machine) run haproxy -c: the dynamic loader, every
// library and nothing loaded at run time that the headers do not name. It
// runs the image's root file system under chroot, which needs root; the
// architecture of this machine natively, the other one through qemu-user
// (Debian's qemu-user-static, whose static emulator is copied into the
// root file system as its only foreign file; .ci/run installs it), so that
// an arm64 image whose haproxy cannot start is caught on an amd64 machine.
// Without root or the emulator the test fails, never skips.
func TestHaproxyRunsFromTheImageFiles(t *testing.T) {
	// Never skipped: make test runs as root, as CI does (the real node
	// needs it too), and a skip would let a broken image pass unnoticed.
	if os.Geteuid() != 0 {
		t.Fatal("this test runs the image's files under chroot, which needs root: run make test as root, as CI does")
	}
	for _, arch := range []string{"amd64", "arm64"} {
		t.Run(arch, func(t *testing.T) {
			var emulator string
			if arch != runtime.GOARCH {
				var err error
				if emulator, err = qemuUser(arch); err != nil {
					t.Fatal(err)
				}
			}
			o := realOptions(t)
			o.Output, o.IndexOutput, o.Listing, o.SBOM = "", "", "", ""
			o.Platforms = listFlag{"linux/" + arch}
			o.Rootfs = filepath.Join(t.TempDir(), "rootfs")
			if err := run(o, io.Discard); err != nil {
				t.Fatal(err)
			}
			// -V: from 3.0 on, haproxy -c says "Configuration file is
			// valid" only when verbose.
			argv := []string{"/usr/sbin/haproxy", "-c", "-V", "-f", "/tmp/check.cfg"}
			if emulator != "" {
				data, err := os.ReadFile(emulator)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(o.Rootfs, "emulator"), data, 0o755); err != nil {
					t.Fatal(err)
				}
				argv = append([]string{"/emulator"}, argv...)
			}
			check := func(config string) (string, error) {
				if err := os.WriteFile(filepath.Join(o.Rootfs, "tmp", "check.cfg"), []byte(config), 0o644); err != nil {
					t.Fatal(err)
				}
				cmd := exec.Command(argv[0], argv[1:]...)
				cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: o.Rootfs}
				cmd.Dir = "/"
				cmd.Env = []string{"PATH=/usr/sbin"}
				out, err := cmd.CombinedOutput()
				return string(out), err
			}
			good := "defaults\n  mode http\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\n" +
				"frontend f\n  bind 127.0.0.1:8080\n  default_backend b\nbackend b\n  http-request set-header X %[req.hdr(host),lower]\n" +
				"  server s1 127.0.0.1:80 ssl verify required ca-file /etc/ssl/certs/ca-certificates.crt\n"
			if out, err := check(good); err != nil || !strings.Contains(out, "Configuration file is valid") {
				t.Fatalf("haproxy -c of a valid configuration: %v\n%s", err, out)
			}
			// And it judges: a wrong configuration is refused (the run
			// above did not pass by not running).
			if out, err := check(good + "  bogus-keyword\n"); err == nil || !strings.Contains(out, "bogus-keyword") {
				t.Fatalf("haproxy -c of a wrong configuration: %v\n%s", err, out)
			}
		})
	}
}

// qemuUser is the path of Debian's static qemu-user emulator of arch.
func qemuUser(arch string) (string, error) {
	name, ok := map[string]string{"amd64": "qemu-x86_64-static", "arm64": "qemu-aarch64-static"}[arch]
	if !ok {
		return "", fmt.Errorf("no emulator is known for %s", arch)
	}
	p := filepath.Join("/usr/bin", name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("running the %s image's files on %s needs %s: apt-get install qemu-user-static (.ci/run installs it): %w", arch, runtime.GOARCH, p, err)
	}
	return p, nil
}
