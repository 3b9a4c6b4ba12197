package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// tgz is a gzip-compressed tar archive of files (name, contents), each
// stamped with modTime, in the order given.
func tgz(t *testing.T, modTime time.Time, files ...[2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.ModTime = modTime
	tw := tar.NewWriter(zw)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f[0], Mode: 0o600, Size: int64(len(f[1])), ModTime: modTime, Uid: 1000, Uname: "dev"}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(f[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// headers lists a gzip-compressed tar archive's headers.
func headers(t *testing.T, data []byte) []*tar.Header {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if !zr.ModTime.IsZero() || zr.Name != "" {
		t.Errorf("gzip header carries time %v, name %q: want neither", zr.ModTime, zr.Name)
	}
	tr := tar.NewReader(zr)
	var hs []*tar.Header
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return hs
		}
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
}

func TestCLIArchiveDependsOnContentsAlone(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "gatehouse")
	license := filepath.Join(dir, "LICENSE")
	write := func() {
		for p, data := range map[string]string{bin: "\x7fELF binary", license: "Apache License"} {
			if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	entries := []archiveEntry{{Name: "gatehouse", Source: bin, Mode: 0o755}, {Name: "LICENSE", Source: license, Mode: 0o644}}
	epoch := time.Unix(1_700_000_000, 0)
	archive := func() []byte {
		var buf bytes.Buffer
		if err := writeArchive(&buf, entries, epoch); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	write()
	first := archive()
	// The files written again later, as a second build writes them.
	later := time.Now().Add(time.Hour)
	write()
	for _, p := range []string{bin, license} {
		if err := os.Chtimes(p, later, later); err != nil {
			t.Fatal(err)
		}
	}
	if second := archive(); !bytes.Equal(first, second) {
		t.Fatal("two archives of the same files differ")
	}
	hs := headers(t, first)
	if len(hs) != 2 || hs[0].Name != "gatehouse" || hs[1].Name != "LICENSE" {
		t.Fatalf("entries %v: want gatehouse, LICENSE", hs)
	}
	for _, h := range hs {
		if !h.ModTime.Equal(epoch) || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: time %v, owner %d:%d %q:%q: want the epoch and root without names", h.Name, h.ModTime, h.Uid, h.Gid, h.Uname, h.Gname)
		}
	}
	if hs[0].Mode != 0o755 || hs[1].Mode != 0o644 {
		t.Errorf("modes %o, %o: want 755 for the binary, 644 for the rest", hs[0].Mode, hs[1].Mode)
	}
}

func TestRepackedChartKeepsHelmsEntriesWithOneTime(t *testing.T) {
	files := [][2]string{
		{"gatehouse/Chart.yaml", "apiVersion: v2\nname: gatehouse\nversion: 1.2.3\nappVersion: 1.2.3\n"},
		{"gatehouse/values.yaml", "image: {}\n"},
		{"gatehouse/templates/deployment.yaml", "kind: Deployment\n"},
	}
	epoch := time.Unix(1_700_000_000, 0)
	repack := func(packedAt time.Time) []byte {
		var buf bytes.Buffer
		if err := repackChart(&buf, tgz(t, packedAt, files...), epoch); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	first, second := repack(time.Now()), repack(time.Now().Add(time.Minute))
	if !bytes.Equal(first, second) {
		t.Fatal("the chart packaged at two times repacks to different bytes")
	}
	var got [][2]string
	if err := eachTarEntry(first, func(name string, data []byte) error {
		got = append(got, [2]string{name, string(data)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(files) {
		t.Fatalf("%d entries, want %d", len(got), len(files))
	}
	for i := range files {
		if got[i] != files[i] {
			t.Errorf("entry %d is %q, want %q (helm's order and contents)", i, got[i][0], files[i][0])
		}
	}
	for _, h := range headers(t, first) {
		if !h.ModTime.Equal(epoch) || h.Mode != 0o644 {
			t.Errorf("%s: time %v, mode %o: want the epoch and 644", h.Name, h.ModTime, h.Mode)
		}
	}
	if err := checkChart(first, "1.2.3"); err != nil {
		t.Errorf("the chart of 1.2.3: %v", err)
	}
	if err := checkChart(first, "1.2.4"); err == nil || !strings.Contains(err.Error(), "helm package --version --app-version") {
		t.Errorf("the chart of 1.2.3 taken for 1.2.4: %v", err)
	}
}

func TestVersionsAreSemanticVersions(t *testing.T) {
	for _, v := range []string{"v0.2.0", "v1.0.0-rc.1", "v10.20.30"} {
		if _, err := namesOf(v); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
	for _, v := range []string{"0.2.0", "v0.2", "v01.2.3", "v0.2.0+build", "v0.2.0/../x", ""} {
		if _, err := namesOf(v); err == nil {
			t.Errorf("%q taken for a version", v)
		}
	}
}

func TestDistNeverEmptiesAnotherDirectory(t *testing.T) {
	dir := t.TempDir()
	mine := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(mine, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := cleanDist(dir); err == nil {
		t.Fatal("a directory without a release was emptied")
	}
	if _, err := os.Stat(mine); err != nil {
		t.Fatalf("the directory's file is gone: %v", err)
	}
	// An earlier release is replaced.
	earlier := t.TempDir()
	for _, f := range []string{"checksums.txt", "gatehouse-0.1.0.tgz"} {
		if err := os.WriteFile(filepath.Join(earlier, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := cleanDist(earlier); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(earlier); len(entries) != 0 {
		t.Errorf("%d files of the earlier release left", len(entries))
	}
	// A new directory is made.
	if err := cleanDist(filepath.Join(dir, "new", "dist")); err != nil {
		t.Fatal(err)
	}
}

// fakeIndex writes a random two-image index as an OCI layout archive, as
// make image writes one, and returns the index's digest.
func fakeIndex(t *testing.T, path string) v1.Hash {
	t.Helper()
	idx, err := random.Index(256, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := idx.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	digest, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"oci-layout": []byte(`{"imageLayoutVersion":"1.0.0"}`), "blobs/sha256/" + digest.Hex: raw}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := img.RawManifest()
		files["blobs/sha256/"+d.Digest.Hex] = m
		cfgName, _ := img.ConfigName()
		cfg, _ := img.RawConfigFile()
		files["blobs/sha256/"+cfgName.Hex] = cfg
		layers, _ := img.Layers()
		for _, l := range layers {
			ld, _ := l.Digest()
			rc, _ := l.Compressed()
			b, _ := io.ReadAll(rc)
			files["blobs/sha256/"+ld.Hex] = b
		}
	}
	top, err := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []any{map[string]any{
		"mediaType": "application/vnd.oci.image.index.v1+json", "size": len(raw), "digest": digest.String(),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	files["index.json"] = top
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for n, b := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: 0o644, Size: int64(len(b))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return digest
}

// fakeRelease writes a release of version v0.3.0 from fake inputs, with
// dist itself (no key: unsigned), and returns its options and the image
// index's digest.
func fakeRelease(t *testing.T) (distOptions, v1.Hash) {
	t.Helper()
	in := t.TempDir()
	digest := fakeIndex(t, filepath.Join(in, "image.oci.tar"))
	inputs := map[string]string{
		"gatehouse-linux":  "linux binary",
		"gatehouse-darwin": "darwin binary",
		"LICENSE":          "Apache License",
		"sbom.json":        `{"spdxVersion":"SPDX-2.3"}`,
		"contents.txt":     "index " + digest.String() + "\n",
		"go.sum":           "example.com/m v1.0.0 h1:x=\n",
	}
	for n, data := range inputs {
		if err := os.WriteFile(filepath.Join(in, n), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	chart := tgz(t, time.Now(), [2]string{"gatehouse/Chart.yaml", "name: gatehouse\nversion: 0.3.0\nappVersion: 0.3.0\n"})
	if err := os.WriteFile(filepath.Join(in, "chart.tgz"), chart, 0o600); err != nil {
		t.Fatal(err)
	}
	o := distOptions{
		Version:      "v0.3.0",
		Dist:         filepath.Join(t.TempDir(), "dist"),
		Binaries:     listFlag{"linux/amd64=" + filepath.Join(in, "gatehouse-linux"), "darwin/arm64=" + filepath.Join(in, "gatehouse-darwin")},
		Include:      listFlag{filepath.Join(in, "LICENSE")},
		ImageIndex:   filepath.Join(in, "image.oci.tar"),
		SBOM:         filepath.Join(in, "sbom.json"),
		Listing:      filepath.Join(in, "contents.txt"),
		Chart:        filepath.Join(in, "chart.tgz"),
		Epoch:        1_700_000_000,
		SourceURI:    "git+https://github.com/gatehouse-dev/gatehouse",
		Revision:     strings.Repeat("ab", 20),
		BuilderID:    defaultBuilderID,
		GoVersion:    "go1.26.8",
		Dependencies: listFlag{"file:go.sum=" + filepath.Join(in, "go.sum")},
	}
	if err := dist(o, io.Discard); err != nil {
		t.Fatal(err)
	}
	return o, digest
}

func TestProvenanceNamesEveryArtifactAndItsSource(t *testing.T) {
	o, digest := fakeRelease(t)
	n, _ := namesOf(o.Version)
	raw, err := os.ReadFile(filepath.Join(o.Dist, n.Provenance()))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Type          string `json:"_type"`
		PredicateType string `json:"predicateType"`
		Subject       []struct {
			Name   string            `json:"name"`
			Digest map[string]string `json:"digest"`
		} `json:"subject"`
		Predicate struct {
			BuildDefinition struct {
				BuildType          string         `json:"buildType"`
				ExternalParameters map[string]any `json:"externalParameters"`
				ResolvedDeps       []struct {
					URI    string            `json:"uri"`
					Digest map[string]string `json:"digest"`
				} `json:"resolvedDependencies"`
			} `json:"buildDefinition"`
			RunDetails struct {
				Builder struct {
					ID string `json:"id"`
				} `json:"builder"`
			} `json:"runDetails"`
		} `json:"predicate"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatalf("%v:\n%s", err, raw)
	}
	if st.Type != "https://in-toto.io/Statement/v1" || st.PredicateType != "https://slsa.dev/provenance/v1" {
		t.Errorf("statement type %q, predicate type %q", st.Type, st.PredicateType)
	}
	subjects := map[string]string{}
	for _, s := range st.Subject {
		subjects[s.Name] = s.Digest["sha256"]
	}
	if subjects[imageSubjectName] != digest.Hex {
		t.Errorf("the image index's subject has digest %q, want %s", subjects[imageSubjectName], digest.Hex)
	}
	sums, err := os.ReadFile(filepath.Join(o.Dist, "checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		sum, file, _ := strings.Cut(line, "  ")
		if file == n.Provenance() {
			continue
		}
		if subjects[file] != sum {
			t.Errorf("%s: provenance's digest %q, checksums.txt's %s", file, subjects[file], sum)
		}
	}
	for _, f := range []string{n.Archive("linux/amd64"), n.Archive("darwin/arm64"), n.Chart(), n.ImageIndex(), n.SBOM(), n.Listing()} {
		if _, ok := subjects[f]; !ok {
			t.Errorf("provenance does not name %s", f)
		}
	}
	bd := st.Predicate.BuildDefinition
	if bd.BuildType != releaseBuildType || bd.ExternalParameters["version"] != "v0.3.0" {
		t.Errorf("build type %q, parameters %v", bd.BuildType, bd.ExternalParameters)
	}
	var commit, goSum bool
	for _, d := range bd.ResolvedDeps {
		commit = commit || d.Digest["gitCommit"] == o.Revision
		goSum = goSum || (d.URI == "file:go.sum" && len(d.Digest["sha256"]) == 64)
	}
	if !commit || !goSum {
		t.Errorf("resolved dependencies %+v: want the commit and go.sum", bd.ResolvedDeps)
	}
	if st.Predicate.RunDetails.Builder.ID != defaultBuilderID {
		t.Errorf("builder %q", st.Predicate.RunDetails.Builder.ID)
	}

	// The same inputs again: every file the same.
	again := o
	again.Dist = filepath.Join(t.TempDir(), "dist")
	if err := dist(again, io.Discard); err != nil {
		t.Fatal(err)
	}
	sums2, err := os.ReadFile(filepath.Join(again.Dist, "checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sums, sums2) {
		t.Errorf("two releases of the same inputs differ:\n%s\n%s", sums, sums2)
	}
}

func TestPublishRefusesAReleaseChangedSinceItWasMade(t *testing.T) {
	o, _ := fakeRelease(t)
	n, _ := namesOf(o.Version)
	p := publishOptions{Version: o.Version, Dist: o.Dist, Registry: "127.0.0.1:1/x"}
	if err := checkRelease(p, n); err != nil {
		t.Fatalf("the release as made: %v", err)
	}
	if err := os.WriteFile(filepath.Join(o.Dist, n.Chart()), []byte("another chart"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := checkRelease(p, n)
	if err == nil || !strings.Contains(err.Error(), "changed since make release") {
		t.Errorf("a changed chart: %v", err)
	}
	p.Version = "v0.4.0"
	n4, _ := namesOf(p.Version)
	if err := checkRelease(p, n4); err == nil {
		t.Error("release v0.3.0 published as v0.4.0")
	}
	// A key but no signature: never pushed as if signed.
	unsigned, _ := fakeRelease(t)
	p = publishOptions{Version: unsigned.Version, Dist: unsigned.Dist, Registry: "127.0.0.1:1/x", Signing: signing{Key: "cosign.key"}}
	if err := checkRelease(p, n); err == nil || !strings.Contains(err.Error(), "not signed") {
		t.Errorf("an unsigned release published with a key: %v", err)
	}
	// Nor keyless.
	p.Signing = signing{Identity: workflowIdentity, Issuer: githubIssuer}
	if err := checkRelease(p, n); err == nil || !strings.Contains(err.Error(), "not signed") {
		t.Errorf("an unsigned release published keyless: %v", err)
	}
	// A release signed keyless (its bundle beside checksums.txt) is not
	// published unless the publisher names the identity that must have
	// signed it: a bundle anyone could have made proves nothing.
	keyless, _ := fakeRelease(t)
	if err := os.WriteFile(filepath.Join(keyless.Dist, n.Bundle()), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	p = publishOptions{Version: keyless.Version, Dist: keyless.Dist, Registry: "127.0.0.1:1/x"}
	if err := checkRelease(p, n); err == nil || !strings.Contains(err.Error(), "--keyless-identity") {
		t.Errorf("a keyless release published without naming its signer: %v", err)
	}
}

const (
	workflowIdentity = "https://github.com/gatehouse-dev/gatehouse/.github/workflows/release.yml@refs/tags/v0.3.0"
	githubIssuer     = "https://token.actions.githubusercontent.com"
)

// TestSigningIsOneWayAndVerifiedAsSigned: a key or keyless, never both;
// keyless always goes through the transparency log and is verified by the
// identity and issuer alone, a key by the release's public key.
func TestSigningIsOneWayAndVerifiedAsSigned(t *testing.T) {
	n, _ := namesOf("v0.3.0")
	for _, bad := range []signing{
		{Key: "cosign.key", Identity: workflowIdentity, Issuer: githubIssuer},
		{Identity: workflowIdentity},
		{Key: "cosign.key", Issuer: githubIssuer},
	} {
		if err := bad.validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	keyless := signing{Identity: workflowIdentity, Issuer: githubIssuer}
	if err := keyless.validate(); err != nil {
		t.Fatal(err)
	}
	if got := keyless.signArgs(); len(got) != 0 {
		t.Errorf("keyless signs with %v; want cosign's ambient identity", got)
	}
	if got := keyless.logArgs(false); len(got) != 0 {
		t.Errorf("keyless logs with %v; want the log cosign's default", got)
	}
	if got, want := keyless.verifyArgs("dist", n, false), []string{"--certificate-identity", workflowIdentity, "--certificate-oidc-issuer", githubIssuer}; !slices.Equal(got, want) {
		t.Errorf("keyless verified with %v, want %v", got, want)
	}
	key := signing{Key: "bin/release-key/cosign.key"}
	if got, want := key.signArgs(), []string{"--key", "bin/release-key/cosign.key"}; !slices.Equal(got, want) {
		t.Errorf("a key signs with %v, want %v", got, want)
	}
	if got, want := key.logArgs(false), []string{"--tlog-upload=false"}; !slices.Equal(got, want) {
		t.Errorf("a key logs with %v, want %v", got, want)
	}
	if got, want := key.verifyArgs("dist", n, false), []string{"--key", filepath.Join("dist", "cosign.pub"), "--insecure-ignore-tlog"}; !slices.Equal(got, want) {
		t.Errorf("a key verified with %v, want %v", got, want)
	}
	if got := key.verifyArgs("dist", n, true); slices.Contains(got, "--insecure-ignore-tlog") {
		t.Errorf("a key whose signatures were logged is verified without the log: %v", got)
	}
}

func TestPublishedImageIsTheBuiltIndex(t *testing.T) {
	o, digest := fakeRelease(t)
	n, _ := namesOf(o.Version)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	p := publishOptions{Version: o.Version, Dist: o.Dist, Registry: host + "/platform", PlainHTTP: true}
	ref, got, err := pushImage(context.Background(), p, n)
	if err != nil {
		t.Fatal(err)
	}
	if ref != host+"/platform/gatehouse:0.3.0" || got != digest.String() {
		t.Errorf("pushed %s@%s, want %s/platform/gatehouse:0.3.0@%s", ref, got, host, digest)
	}
	parsed, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(parsed)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 2 {
		t.Errorf("the registry's index lists %d images, want 2", len(im.Manifests))
	}
	for _, d := range im.Manifests {
		r, err := name.ParseReference(host+"/platform/gatehouse@"+d.Digest.String(), name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := remote.Image(r); err != nil {
			t.Errorf("image %s: %v", d.Digest, err)
		}
	}
}

func TestPublishRefusesALayoutWithOtherFiles(t *testing.T) {
	dir := t.TempDir()
	archive := filepath.Join(dir, "evil.oci.tar")
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range []string{"oci-layout", "../outside"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: 0o644}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(archive, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	into := filepath.Join(dir, "layout")
	if err := unpackLayout(archive, into); err == nil || !strings.Contains(err.Error(), "not a file of an OCI image layout") {
		t.Errorf("an archive naming ../outside: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "outside")); err == nil {
		t.Error("a file was written outside the layout")
	}
}
