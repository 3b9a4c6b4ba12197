package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

const testRef = "ghcr.io/gatehouse-dev/gatehouse:0.1.0"

// fixture writes small stand-ins for the image's inputs: a "binary", a
// host file reached through a symbolic link to a directory (as /lib ->
// usr/lib on Debian), and returns the options that build an image of
// them.
func fixture(t *testing.T) (options, string) {
	t.Helper()
	dir := t.TempDir()
	write := func(name, data string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bin := write("build/gatehouse", "#!not really a program\n", 0o775)
	write("usr/lib/libfixture.so.1.2", "library", 0o644)
	if err := os.Symlink("libfixture.so.1.2", filepath.Join(dir, "usr/lib/libfixture.so.1")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("usr/lib", filepath.Join(dir, "lib")); err != nil {
		t.Fatal(err)
	}
	// A setuid file on the host must not stay setuid in the image.
	suid := write("usr/bin/helper", "helper", 0o755)
	if err := os.Chmod(suid, 0o4755); err != nil {
		t.Fatal(err)
	}
	o := options{
		Ref:       testRef,
		Output:    filepath.Join(dir, "out", "image.tar"),
		Files:     listFlag{"/usr/local/bin/gatehouse=" + bin},
		Host:      listFlag{filepath.Join(dir, "lib/libfixture.so.1"), suid},
		Dirs:      listFlag{"/tmp=1777"},
		User:      "gatehouse:65532",
		Entry:     listFlag{"/usr/local/bin/gatehouse"},
		Env:       listFlag{"PATH=/usr/local/bin"},
		Labels:    listFlag{"org.opencontainers.image.version=v0.1.0"},
		WorkDir:   "/",
		Platforms: listFlag{"linux/amd64"},
		Epoch:     1700000000,
	}
	return o, dir
}

func build(t *testing.T, o options) []byte {
	t.Helper()
	if err := run(o, io.Discard); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(o.Output)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// archive is an image archive read back: its files by name.
type archive map[string][]byte

func readArchive(t *testing.T, data []byte) archive {
	t.Helper()
	a := archive{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return a
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		a[h.Name] = b
	}
}

func (a archive) blob(t *testing.T, d v1.Hash) []byte {
	t.Helper()
	b, ok := a["blobs/"+d.Algorithm+"/"+d.Hex]
	if !ok {
		t.Fatalf("archive has no blob %s", d)
	}
	return b
}

// image returns the index's one descriptor, the manifest, and the config.
func (a archive) image(t *testing.T) (v1.Descriptor, *v1.Manifest, *v1.ConfigFile) {
	t.Helper()
	var index v1.IndexManifest
	if err := json.Unmarshal(a["index.json"], &index); err != nil {
		t.Fatal(err)
	}
	if len(index.Manifests) != 1 {
		t.Fatalf("index.json has %d manifests, want 1", len(index.Manifests))
	}
	desc := index.Manifests[0]
	var m v1.Manifest
	if err := json.Unmarshal(a.blob(t, desc.Digest), &m); err != nil {
		t.Fatal(err)
	}
	var cf v1.ConfigFile
	if err := json.Unmarshal(a.blob(t, m.Config.Digest), &cf); err != nil {
		t.Fatal(err)
	}
	return desc, &m, &cf
}

// layer returns the headers and contents of the image's one layer.
func (a archive) layer(t *testing.T) ([]*tar.Header, map[string][]byte) {
	t.Helper()
	_, m, _ := a.image(t)
	if len(m.Layers) != 1 {
		t.Fatalf("%d layers, want 1", len(m.Layers))
	}
	zr, err := gzip.NewReader(bytes.NewReader(a.blob(t, m.Layers[0].Digest)))
	if err != nil {
		t.Fatal(err)
	}
	var headers []*tar.Header
	files := map[string][]byte{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return headers, files
		}
		if err != nil {
			t.Fatal(err)
		}
		headers = append(headers, h)
		if files[h.Name], err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
}

// TestImageIsReproducible: the same inputs give the same archive, byte for
// byte (and so the same digest); a changed file or timestamp gives another
// digest.
func TestImageIsReproducible(t *testing.T) {
	o, dir := fixture(t)
	first := build(t, o)
	firstDesc, _, _ := readArchive(t, first).image(t)

	// Built again into another file, after the inputs' own times changed.
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "build/gatehouse"), later, later); err != nil {
		t.Fatal(err)
	}
	o.Output = filepath.Join(dir, "again", "image.tar")
	if again := build(t, o); !bytes.Equal(first, again) {
		t.Fatal("the same inputs built two different archives")
	}

	if err := os.WriteFile(filepath.Join(dir, "usr/lib/libfixture.so.1.2"), []byte("librarz"), 0o644); err != nil {
		t.Fatal(err)
	}
	changedDesc, _, _ := readArchive(t, build(t, o)).image(t)
	if changedDesc.Digest == firstDesc.Digest {
		t.Fatal("a changed file left the digest as it was")
	}

	o.Epoch++
	epochDesc, _, _ := readArchive(t, build(t, o)).image(t)
	if epochDesc.Digest == changedDesc.Digest {
		t.Fatal("another SOURCE_DATE_EPOCH left the digest as it was")
	}
}

// TestImageLayout: the archive is an OCI image layout that containerd
// names after the whole reference (ctr images import reads
// io.containerd.image.name), with a docker-style manifest.json beside it
// pointing at the same blobs; the config runs the entrypoint as the
// non-root user.
func TestImageLayout(t *testing.T) {
	o, _ := fixture(t)
	a := readArchive(t, build(t, o))
	if string(a["oci-layout"]) != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout = %s", a["oci-layout"])
	}
	desc, m, cf := a.image(t)
	if got := desc.Annotations[annotationContainerdName]; got != testRef {
		t.Errorf("%s = %q, want %q", annotationContainerdName, got, testRef)
	}
	if got := desc.Annotations[annotationRefName]; got != "0.1.0" {
		t.Errorf("%s = %q, want the tag", annotationRefName, got)
	}
	if desc.Platform == nil || desc.Platform.OS != "linux" || desc.Platform.Architecture != "amd64" {
		t.Errorf("index platform %v, want linux/amd64", desc.Platform)
	}
	if m.MediaType != "application/vnd.oci.image.manifest.v1+json" || m.Config.MediaType != "application/vnd.oci.image.config.v1+json" {
		t.Errorf("media types %s, %s: want OCI", m.MediaType, m.Config.MediaType)
	}
	var docker []dockerManifestEntry
	if err := json.Unmarshal(a["manifest.json"], &docker); err != nil {
		t.Fatal(err)
	}
	if len(docker) != 1 || !slices.Equal(docker[0].RepoTags, []string{testRef}) ||
		docker[0].Config != "blobs/sha256/"+m.Config.Digest.Hex || len(docker[0].Layers) != 1 || docker[0].Layers[0] != "blobs/sha256/"+m.Layers[0].Digest.Hex {
		t.Errorf("manifest.json %+v does not match the OCI manifest", docker)
	}

	if cf.Config.User != "65532:65532" {
		t.Errorf("User %q, want 65532:65532", cf.Config.User)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{"/usr/local/bin/gatehouse"}) || len(cf.Config.Cmd) != 0 {
		t.Errorf("Entrypoint %q Cmd %q: want the binary alone (the chart passes flags as args)", cf.Config.Entrypoint, cf.Config.Cmd)
	}
	if cf.Config.Labels["org.opencontainers.image.version"] != "v0.1.0" {
		t.Errorf("labels %v", cf.Config.Labels)
	}
	if want := time.Unix(o.Epoch, 0).UTC(); !cf.Created.Time.Equal(want) || len(cf.History) != 1 || !cf.History[0].Created.Time.Equal(want) {
		t.Errorf("created %v, history %v: want %v", cf.Created, cf.History, want)
	}
	if len(cf.RootFS.DiffIDs) != 1 {
		t.Errorf("diff IDs %v", cf.RootFS.DiffIDs)
	}
}

// TestLayerFiles: the layer holds exactly the files asked for, with the
// links on their way, owned by root, without setuid or setgid, all at
// SOURCE_DATE_EPOCH; /etc/passwd and /etc/group name the non-root user.
func TestLayerFiles(t *testing.T) {
	o, dir := fixture(t)
	headers, files := readArchive(t, build(t, o)).layer(t)
	// The fixture's host paths are beneath dir; the image keeps them.
	host := strings.TrimPrefix(dir, "/")
	var got []string
	for _, h := range headers {
		line := h.Name
		if h.Typeflag == tar.TypeSymlink {
			line += " -> " + h.Linkname
		}
		got = append(got, strings.Replace(line, host, "HOST", 1)+" "+modeString(h.Mode))
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: owner %d:%d (%q:%q), want 0:0 unnamed", h.Name, h.Uid, h.Gid, h.Uname, h.Gname)
		}
		if h.Mode&(0o4000|0o2000) != 0 {
			t.Errorf("%s: mode %#o is setuid or setgid", h.Name, h.Mode)
		}
		if !h.ModTime.Equal(time.Unix(o.Epoch, 0)) || len(h.PAXRecords) > 0 && h.PAXRecords["atime"] != "" {
			t.Errorf("%s: time %v, want SOURCE_DATE_EPOCH", h.Name, h.ModTime)
		}
	}
	want := []string{
		"etc/ rwxr-xr-x",
		"etc/group rw-r--r--",
		"etc/passwd rw-r--r--",
		"HOST/ rwxr-xr-x",
		"HOST/lib -> usr/lib rwxrwxrwx",
		"HOST/usr/ rwxr-xr-x",
		"HOST/usr/bin/ rwxr-xr-x",
		"HOST/usr/bin/helper rwxr-xr-x",
		"HOST/usr/lib/ rwxr-xr-x",
		"HOST/usr/lib/libfixture.so.1 -> libfixture.so.1.2 rwxrwxrwx",
		"HOST/usr/lib/libfixture.so.1.2 rw-r--r--",
		"tmp/ rwxrwxrwt",
		"usr/ rwxr-xr-x",
		"usr/local/ rwxr-xr-x",
		"usr/local/bin/ rwxr-xr-x",
		"usr/local/bin/gatehouse rwxr-xr-x",
	}
	// The directories above the fixture's (t.TempDir, beneath /tmp here).
	for p := path.Dir("/" + host); p != "/"; p = path.Dir(p) {
		if line := strings.TrimPrefix(p, "/") + "/ rwxr-xr-x"; !slices.ContainsFunc(want, func(w string) bool {
			return strings.HasPrefix(w, strings.TrimPrefix(p, "/")+"/ ")
		}) {
			want = append(want, line)
		}
	}
	if !slices.IsSortedFunc(headers, func(a, b *tar.Header) int { return strings.Compare(a.Name, b.Name) }) {
		t.Error("the layer's entries are not in path order")
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("layer files:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if p := string(files["etc/passwd"]); !strings.Contains(p, "\ngatehouse:x:65532:65532:") {
		t.Errorf("/etc/passwd has no gatehouse user 65532:\n%s", p)
	}
	if g := string(files["etc/group"]); !strings.Contains(g, "\ngatehouse:x:65532:") {
		t.Errorf("/etc/group has no gatehouse group 65532:\n%s", g)
	}
}

// TestRootfsMatchesLayer: --rootfs (the Dockerfile's build stage) writes
// the same files, links and modes as the layer.
func TestRootfsMatchesLayer(t *testing.T) {
	o, _ := fixture(t)
	o.Rootfs = filepath.Join(t.TempDir(), "rootfs")
	headers, files := readArchive(t, build(t, o)).layer(t)
	var fromDir []string
	err := filepath.Walk(o.Rootfs, func(p string, info os.FileInfo, err error) error {
		if err != nil || p == o.Rootfs {
			return err
		}
		rel, _ := filepath.Rel(o.Rootfs, p)
		line := filepath.ToSlash(rel)
		switch {
		case info.Mode()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			line += " -> " + target
		case info.IsDir():
			line += "/ " + info.Mode().Perm().String()
			if info.Mode()&os.ModeSticky != 0 {
				line += " sticky"
			}
		default:
			data, _ := os.ReadFile(p)
			if !bytes.Equal(data, files[filepath.ToSlash(rel)]) {
				t.Errorf("%s differs from the layer's", rel)
			}
			line += " " + info.Mode().Perm().String()
		}
		fromDir = append(fromDir, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var fromLayer []string
	for _, h := range headers {
		fi := h.FileInfo()
		switch h.Typeflag {
		case tar.TypeSymlink:
			fromLayer = append(fromLayer, h.Name+" -> "+h.Linkname)
		case tar.TypeDir:
			line := h.Name + " " + fi.Mode().Perm().String()
			if h.Mode&0o1000 != 0 {
				line += " sticky"
			}
			fromLayer = append(fromLayer, line)
		default:
			fromLayer = append(fromLayer, h.Name+" "+fi.Mode().Perm().String())
		}
	}
	slices.Sort(fromDir)
	slices.Sort(fromLayer)
	if !slices.Equal(fromDir, fromLayer) {
		t.Errorf("--rootfs:\n%s\nlayer:\n%s", strings.Join(fromDir, "\n"), strings.Join(fromLayer, "\n"))
	}
}

// TestRefusals: inputs that would make a wrong image are errors.
func TestRefusals(t *testing.T) {
	for name, change := range map[string]func(*options){
		"no tag":               func(o *options) { o.Ref = "ghcr.io/gatehouse-dev/gatehouse" },
		"root user":            func(o *options) { o.User = "root:0" },
		"setuid directory":     func(o *options) { o.Dirs = listFlag{"/tmp=4755"} },
		"missing entrypoint":   func(o *options) { o.Entry = listFlag{"/gatehouse"} },
		"two files at a path":  func(o *options) { o.Files = append(o.Files, "/usr/local/bin/gatehouse=/etc/hostname") },
		"static program --elf": func(o *options) { o.ELF = listFlag{o.Files[0][strings.Index(o.Files[0], "=")+1:]} },
	} {
		t.Run(name, func(t *testing.T) {
			o, _ := fixture(t)
			change(&o)
			if err := run(o, io.Discard); err == nil {
				t.Fatal("built an image")
			}
		})
	}
}

// resolveIn follows p through the image's own links (as the kernel and the
// loader would inside the container) to an entry that is not a link.
func resolveIn(rfs *rootfs, p string) (string, bool) {
	for range 40 {
		p = path.Clean(p)
		parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
		moved := false
		for i := range parts {
			prefix := "/" + strings.Join(parts[:i+1], "/")
			e, ok := rfs.entries[prefix]
			if !ok {
				if i == len(parts)-1 || !isImplicitDir(rfs, prefix) {
					return "", false
				}
				continue
			}
			if e.Type == tar.TypeSymlink {
				target := e.Target
				if !path.IsAbs(target) {
					target = path.Join(path.Dir(prefix), target)
				}
				p = path.Join(append([]string{target}, parts[i+1:]...)...)
				moved = true
				break
			}
			if i == len(parts)-1 {
				return prefix, true
			}
		}
		if !moved {
			return "", false
		}
	}
	return "", false
}

// isImplicitDir: a directory the layer writes because an entry is beneath it.
func isImplicitDir(rfs *rootfs, dir string) bool {
	for p := range rfs.entries {
		if strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	return false
}

// TestDockerfileMatchesArgs: the Dockerfile's final stage configures the
// image as gatehouse.args does (user, environment, entrypoint, labels),
// and its Go base image is of go.mod's Go release, by tag and by a sha256
// digest (make pin-dockerfile refreshes it).
func TestDockerfileMatchesArgs(t *testing.T) {
	docker := string(mustRead(t, filepath.Join("..", "..", "Dockerfile")))
	args, err := expandArgFiles([]string{"@gatehouse.args"})
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		var want string
		switch k {
		case "--user":
			_, id, _ := strings.Cut(v, ":")
			want = "USER " + id + ":" + id
		case "--env":
			want = "ENV " + v
		case "--entrypoint":
			want = `ENTRYPOINT ["` + v + `"]`
		case "--label":
			labels = append(labels, v)
			continue
		default:
			continue
		}
		if !strings.Contains(docker, "\n"+want+"\n") {
			t.Errorf("the Dockerfile has no line %q (gatehouse.args %s)", want, a)
		}
	}
	label := docker[strings.LastIndex(docker, "LABEL "):]
	for _, l := range labels {
		if !strings.Contains(label, l) {
			t.Errorf("the Dockerfile's LABEL has no %s", l)
		}
	}
	m := regexp.MustCompile(`\nARG GOLANG_IMAGE=golang:([0-9.]+)-bookworm@sha256:[0-9a-f]{64}\n`).FindStringSubmatch(docker)
	if m == nil {
		t.Fatal("the Dockerfile has no ARG GOLANG_IMAGE=golang:<version>-bookworm@sha256:<digest>: a base by tag alone may change under a release")
	}
	gomod := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(string(mustRead(t, filepath.Join("..", "..", "go.mod"))))
	if gomod == nil || !strings.HasPrefix(m[1], gomod[1]+".") {
		t.Errorf("the Dockerfile builds with Go %s; go.mod asks for %v", m[1], gomod)
	}
}
