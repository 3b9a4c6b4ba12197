//go:build release

// The release's signing, played offline with the pinned cosign: make
// test-release (which .ci/run runs through make test-ci) builds cosign and
// runs this file; make test leaves it out, and cosign's build with it.

package main

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// cosignBinary is the pinned cosign (hack/tools/cosign) that make tools
// builds into bin/; COSIGN names another.
func cosignBinary(t *testing.T) string {
	t.Helper()
	p := os.Getenv("COSIGN")
	if p == "" {
		p = filepath.Join("..", "..", "bin", "cosign")
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(abs); err != nil {
		t.Fatalf("%v: build it with make bin/cosign (make tools does)", err)
	}
	return abs
}

// TestCosignSignsAndVerifiesTheIndex plays the release workflow's signing
// offline: make image's index is pushed (as crane pushes the layout) to a
// registry in this process, signed and its SBOM attested with cosign and a
// local key (no transparency log: nothing here reaches the network), then
// verified as a user would. A signature under another key, or on another
// digest, does not verify.
func TestCosignSignsAndVerifiesTheIndex(t *testing.T) {
	cosign := cosignBinary(t)
	o := realBuild(t)

	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	repo := host + "/gatehouse-dev/gatehouse"

	// Push the index from the unpacked layout, as the release does.
	dir := t.TempDir()
	unpack(t, mustRead(t, o.IndexOutput), filepath.Join(dir, "layout"))
	lp, err := layout.FromPath(filepath.Join(dir, "layout"))
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(repo+":0.1.0", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(tag, idx); err != nil {
		t.Fatal(err)
	}
	digest, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	signed := repo + "@" + digest.String()
	// Another image in the same repository, pushed but never signed: the
	// index's amd64 image.
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	unsigned := repo + "@" + im.Manifests[0].Digest.String()

	env := append(os.Environ(), "COSIGN_PASSWORD=offline-test", "HOME="+dir, "TUF_ROOT="+filepath.Join(dir, "tuf"), "COSIGN_EXPERIMENTAL=0")
	cmd := func(args ...string) (string, error) {
		c := exec.Command(cosign, args...)
		c.Dir, c.Env = dir, env
		out, err := c.CombinedOutput()
		return string(out), err
	}
	mustCmd := func(args ...string) string {
		t.Helper()
		out, err := cmd(args...)
		if err != nil {
			t.Fatalf("cosign %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	mustCmd("generate-key-pair", "--output-key-prefix", "release")
	mustCmd("generate-key-pair", "--output-key-prefix", "other")
	reg := []string{"--allow-http-registry", "--allow-insecure-registry"}
	mustCmd(append([]string{"sign", "--yes", "--key", "release.key", "--tlog-upload=false"}, append(reg, signed)...)...)
	mustCmd(append([]string{"attest", "--yes", "--key", "release.key", "--tlog-upload=false", "--type", "spdxjson", "--predicate", o.SBOM}, append(reg, signed)...)...)

	out := mustCmd(append([]string{"verify", "--key", "release.pub", "--insecure-ignore-tlog", "--output", "json"}, append(reg, signed)...)...)
	if !strings.Contains(out, digest.String()) {
		t.Errorf("cosign verify does not name the signed digest %s:\n%s", digest, out)
	}
	out = mustCmd(append([]string{"verify-attestation", "--key", "release.pub", "--insecure-ignore-tlog", "--type", "spdxjson"}, append(reg, signed)...)...)
	predicate := attestedPredicate(t, out)
	if !strings.Contains(predicate, "pkg:deb/debian/haproxy@") || !strings.Contains(predicate, `"spdxVersion":"SPDX-2.3"`) {
		t.Errorf("the attested predicate is not the image's SBOM:\n%.2000s", predicate)
	}

	if out, err := cmd(append([]string{"verify", "--key", "other.pub", "--insecure-ignore-tlog"}, append(reg, signed)...)...); err == nil {
		t.Errorf("the signature verified under another key:\n%s", out)
	}
	if out, err := cmd(append([]string{"verify", "--key", "release.pub", "--insecure-ignore-tlog"}, append(reg, unsigned)...)...); err == nil {
		t.Errorf("an image that was never signed verified:\n%s", out)
	}
	if out, err := cmd(append([]string{"verify-attestation", "--key", "other.pub", "--insecure-ignore-tlog", "--type", "spdxjson"}, append(reg, signed)...)...); err == nil {
		t.Errorf("the attestation verified under another key:\n%s", out)
	}
}

// attestedPredicate decodes cosign verify-attestation's output (one DSSE
// envelope a line, its payload an in-toto statement) into the predicate.
func attestedPredicate(t *testing.T, out string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		var env struct {
			Payload string `json:"payload"`
		}
		if json.Unmarshal([]byte(line), &env) != nil || env.Payload == "" {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(env.Payload)
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			PredicateType string          `json:"predicateType"`
			Subject       []any           `json:"subject"`
			Predicate     json.RawMessage `json:"predicate"`
		}
		if err := json.Unmarshal(raw, &st); err != nil {
			t.Fatal(err)
		}
		if st.PredicateType != "https://spdx.dev/Document" || len(st.Subject) != 1 {
			t.Errorf("predicate type %q, %d subjects", st.PredicateType, len(st.Subject))
		}
		var compact strings.Builder
		var v any
		if err := json.Unmarshal(st.Predicate, &v); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(v)
		compact.Write(b)
		return compact.String()
	}
	t.Fatalf("no attestation in cosign's output:\n%s", out)
	return ""
}

// unpack writes an archive's files beneath dir.
func unpack(t *testing.T, data []byte, dir string) {
	t.Helper()
	for n, b := range readArchive(t, data) {
		if strings.HasSuffix(n, "/") {
			continue
		}
		p := filepath.Join(dir, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
