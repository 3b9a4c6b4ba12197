package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// publishOptions are publish's command line.
type publishOptions struct {
	Version    string
	Dist       string
	Registry   string
	PlainHTTP  bool
	Cosign     string
	Helm       string
	Signing    signing
	TlogUpload bool
}

func runPublish(args []string) error {
	var o publishOptions
	fs := flag.NewFlagSet("release publish", flag.ExitOnError)
	fs.StringVar(&o.Version, "version", "", "The release's version, as make release wrote it.")
	fs.StringVar(&o.Dist, "dist", "dist", "The release's directory (make release).")
	fs.StringVar(&o.Registry, "registry", "", "HOST[:PORT]/PATH the image goes to (as PATH/gatehouse) and the chart (as PATH/charts/gatehouse).")
	fs.BoolVar(&o.PlainHTTP, "plain-http", false, "Talk to the registry over plain HTTP (a registry on loopback).")
	fs.StringVar(&o.Cosign, "cosign", "cosign", "The cosign binary that signs.")
	fs.StringVar(&o.Helm, "helm", "helm", "The helm binary that pushes the chart.")
	o.Signing.addFlags(fs, "nothing is signed in the registry")
	fs.BoolVar(&o.TlogUpload, "tlog-upload", false, "Record the signatures in Sigstore's public transparency log (needs its network).")
	_ = fs.Parse(args)
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return publish(context.Background(), o, os.Stdout)
}

// registryPath is HOST[:PORT]/PATH, lower case, as an OCI reference's
// repository prefix.
var registryPath = regexp.MustCompile(`^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)*$`)

// published is where a release went.
type published struct {
	Image       string // REGISTRY/gatehouse:TAG
	ImageDigest string
	Chart       string // oci://REGISTRY/charts/gatehouse
	ChartDigest string
}

func publish(ctx context.Context, o publishOptions, out io.Writer) error {
	n, err := namesOf(o.Version)
	if err != nil {
		return err
	}
	if err := o.Signing.validate(); err != nil {
		return err
	}
	if !registryPath.MatchString(o.Registry) {
		return fmt.Errorf("registry %q: want HOST[:PORT]/PATH in lower case (registry.example:5000/platform)", o.Registry)
	}
	if err := checkRelease(o, n); err != nil {
		return err
	}
	var p published
	if p.Image, p.ImageDigest, err = pushImage(ctx, o, n); err != nil {
		return fmt.Errorf("pushing the image: %w", err)
	}
	fmt.Fprintf(out, "pushed the image %s@%s\n", p.Image, p.ImageDigest)
	if p.Chart, p.ChartDigest, err = pushChart(o, n); err != nil {
		return fmt.Errorf("pushing the chart: %w", err)
	}
	fmt.Fprintf(out, "pushed the chart %s:%s@%s\n", p.Chart, n.Version, p.ChartDigest)
	if !o.Signing.enabled() {
		fmt.Fprintln(out, "nothing signed: no key given")
	} else {
		if err := signPublished(o, n, p); err != nil {
			return err
		}
		fmt.Fprintln(out, "signed the image and the chart; attested the image's provenance (slsaprovenance1) and SBOM (spdxjson)")
	}
	fmt.Fprintf(out, "install it:\n  helm install gatehouse %s --version %s --namespace gatehouse-system --create-namespace \\\n"+
		"    --set image.repository=%s --set image.digest=%s\n",
		p.Chart, n.Version, strings.TrimSuffix(p.Image, ":"+n.Tag()), p.ImageDigest)
	return nil
}

// checkRelease checks every file against checksums.txt, and
// checksums.txt against its signature when the release has one: what is
// pushed is what make release wrote.
func checkRelease(o publishOptions, n names) error {
	sums, err := os.ReadFile(filepath.Join(o.Dist, n.Checksums()))
	if err != nil {
		return fmt.Errorf("%w: run make release VERSION=%s first", err, o.Version)
	}
	want := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(sums))
	for sc.Scan() {
		sum, file, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			return fmt.Errorf("%s: line %q is not sha256sum's", n.Checksums(), sc.Text())
		}
		want[file] = sum
	}
	for _, f := range []string{n.Chart(), n.ImageIndex(), n.SBOM(), n.Provenance()} {
		if _, ok := want[f]; !ok {
			return fmt.Errorf("%s does not list %s: not release %s", n.Checksums(), f, o.Version)
		}
	}
	for f, sum := range want {
		got, err := fileSHA256(filepath.Join(o.Dist, f))
		if err != nil {
			return err
		}
		if got != sum {
			return fmt.Errorf("%s: SHA-256 %s, checksums.txt says %s: changed since make release", f, got, sum)
		}
	}
	_, keyErr := os.Stat(filepath.Join(o.Dist, n.Signature()))
	_, bundleErr := os.Stat(filepath.Join(o.Dist, n.Bundle()))
	switch {
	case keyErr == nil:
		// Signed with a key: the public key in the release checks it
		// (verifying needs no private key, so none is named here).
		if err := verifyChecksums(o.Cosign, signing{}, o.Dist, n); err != nil {
			return fmt.Errorf("checksums.txt's signature: %w", err)
		}
		if o.Signing.keyless() {
			return errors.New("checksums.txt is signed with a key, and publishing is asked to sign keyless: make release and make publish sign one way")
		}
	case bundleErr == nil:
		if !o.Signing.keyless() {
			return fmt.Errorf("checksums.txt is signed keyless (%s): give the signer's --keyless-identity and --keyless-issuer to check and publish it", n.Bundle())
		}
		if err := verifyChecksums(o.Cosign, o.Signing, o.Dist, n); err != nil {
			return fmt.Errorf("checksums.txt's keyless signature: %w", err)
		}
	case o.Signing.enabled():
		return fmt.Errorf("checksums.txt is not signed and publishing is asked to sign: make release the same way first")
	}
	return nil
}

// pushImage pushes the image index as make image built it: the registry
// serves it under the digest the listing and provenance name.
func pushImage(ctx context.Context, o publishOptions, n names) (ref, digest string, err error) {
	dir, err := os.MkdirTemp("", "gatehouse-publish-")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(dir)
	if err := unpackLayout(filepath.Join(o.Dist, n.ImageIndex()), dir); err != nil {
		return "", "", err
	}
	lp, err := layout.FromPath(dir)
	if err != nil {
		return "", "", err
	}
	top, err := lp.ImageIndex()
	if err != nil {
		return "", "", err
	}
	tm, err := top.IndexManifest()
	if err != nil {
		return "", "", err
	}
	if len(tm.Manifests) != 1 {
		return "", "", fmt.Errorf("the layout names %d manifests, not one image index", len(tm.Manifests))
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		return "", "", err
	}
	var nameOpts []name.Option
	if o.PlainHTTP {
		nameOpts = append(nameOpts, name.Insecure)
	}
	ref = o.Registry + "/" + n.ImageRepository() + ":" + n.Tag()
	tag, err := name.NewTag(ref, nameOpts...)
	if err != nil {
		return "", "", err
	}
	remoteOpts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	if err := remote.WriteIndex(tag, idx, remoteOpts...); err != nil {
		return "", "", err
	}
	desc, err := remote.Head(tag, remoteOpts...)
	if err != nil {
		return "", "", err
	}
	if desc.Digest != tm.Manifests[0].Digest {
		return "", "", fmt.Errorf("the registry serves %s as %s, not the built %s", ref, desc.Digest, tm.Manifests[0].Digest)
	}
	return ref, desc.Digest.String(), nil
}

// unpackLayout writes an OCI layout archive's files (oci-layout,
// index.json, blobs/<algorithm>/<hex>) beneath dir, refusing any other
// name.
func unpackLayout(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	blob := regexp.MustCompile(`^blobs/sha256/[0-9a-f]{64}$`)
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if h.Typeflag == tar.TypeDir {
			continue
		}
		if h.Typeflag != tar.TypeReg || (h.Name != "oci-layout" && h.Name != "index.json" && !blob.MatchString(h.Name)) {
			return fmt.Errorf("%s: %q is not a file of an OCI image layout", archive, h.Name)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		w, err := os.Create(p)
		if err != nil {
			return err
		}
		if _, err := io.Copy(w, tr); err != nil {
			w.Close()
			return err
		}
		if err := w.Close(); err != nil {
			return err
		}
	}
}

// helmDigest is the line helm push prints with the pushed manifest's
// digest.
var helmDigest = regexp.MustCompile(`(?m)^Digest: (sha256:[0-9a-f]{64})$`)

// pushChart pushes the chart with helm push, as a user's helm install
// oci://… then pulls it.
func pushChart(o publishOptions, n names) (ref, digest string, err error) {
	ref = "oci://" + o.Registry + "/" + n.ChartRepository()
	args := []string{"push", filepath.Join(o.Dist, n.Chart()), ref}
	if o.PlainHTTP {
		args = append(args, "--plain-http")
	}
	out, err := exec.Command(o.Helm, args...).CombinedOutput()
	if err != nil {
		return "", "", fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	m := helmDigest.FindSubmatch(out)
	if m == nil {
		return "", "", fmt.Errorf("helm push printed no digest:\n%s", out)
	}
	return ref + "/gatehouse", string(m[1]), nil
}

// signPublished signs the image index (and each platform's image) and the
// chart by digest, never by tag, and attests the image's provenance and
// SBOM; then verifies all of it from the registry as a user would.
func signPublished(o publishOptions, n names, p published) error {
	image := strings.TrimSuffix(p.Image, ":"+n.Tag()) + "@" + p.ImageDigest
	chart := strings.TrimPrefix(p.Chart, "oci://") + "@" + p.ChartDigest
	s := o.Signing
	common := s.logArgs(o.TlogUpload)
	verify := s.verifyArgs(o.Dist, n, o.TlogUpload || s.keyless())
	if o.PlainHTTP {
		common = append(common, "--allow-http-registry", "--allow-insecure-registry")
		verify = append(verify, "--allow-http-registry", "--allow-insecure-registry")
	}
	predicate, err := provenancePredicate(filepath.Join(o.Dist, n.Provenance()))
	if err != nil {
		return err
	}
	defer os.Remove(predicate)
	steps := [][]string{
		slices.Concat([]string{"sign", "--yes", "--recursive"}, s.signArgs(), common, []string{image}),
		slices.Concat([]string{"attest", "--yes", "--type", "slsaprovenance1", "--predicate", predicate}, s.signArgs(), common, []string{image}),
		slices.Concat([]string{"attest", "--yes", "--type", "spdxjson", "--predicate", filepath.Join(o.Dist, n.SBOM())}, s.signArgs(), common, []string{image}),
		slices.Concat([]string{"sign", "--yes"}, s.signArgs(), common, []string{chart}),
		append(append([]string{"verify"}, verify...), image),
		append(append([]string{"verify-attestation", "--type", "slsaprovenance1"}, verify...), image),
		append(append([]string{"verify-attestation", "--type", "spdxjson"}, verify...), image),
		append(append([]string{"verify"}, verify...), chart),
	}
	for _, args := range steps {
		if _, err := cosign(o.Cosign, args...); err != nil {
			return err
		}
	}
	return nil
}

// provenancePredicate writes the predicate of the release's provenance
// statement to a temporary file, for cosign attest (which makes a
// statement of it with the pushed image as its subject).
func provenancePredicate(statementPath string) (string, error) {
	raw, err := os.ReadFile(statementPath)
	if err != nil {
		return "", err
	}
	var st struct {
		PredicateType string          `json:"predicateType"`
		Predicate     json.RawMessage `json:"predicate"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return "", err
	}
	if st.PredicateType != provenancePredicateType || len(st.Predicate) == 0 {
		return "", errors.New(statementPath + ": not an SLSA provenance v1 statement")
	}
	f, err := os.CreateTemp("", "gatehouse-provenance-*.json")
	if err != nil {
		return "", err
	}
	if _, err := f.Write(st.Predicate); err != nil {
		f.Close()
		return "", err
	}
	return f.Name(), f.Close()
}
