package main

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/gatehouse-dev/gatehouse/hack/internal/atomicfile"
)

// listFlag is a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// distOptions are dist's command line.
type distOptions struct {
	Version      string
	Dist         string
	Binaries     listFlag // OS/ARCH=PATH
	Include      listFlag // files beside the binary in every archive
	ImageIndex   string
	SBOM         string
	Listing      string
	Chart        string
	Epoch        int64
	SourceURI    string
	Revision     string
	Modified     bool
	BuilderID    string
	GoVersion    string
	Dependencies listFlag // URI=PATH: a build input recorded by its file's digest
	Cosign       string
	Signing      signing
}

func runDist(args []string) error {
	var o distOptions
	fs := flag.NewFlagSet("release dist", flag.ExitOnError)
	fs.StringVar(&o.Version, "version", "", "The release's version, vMAJOR.MINOR.PATCH[-PRERELEASE].")
	fs.StringVar(&o.Dist, "dist", "dist", "The release's directory: created, or emptied when it holds an earlier release (never another directory's files).")
	fs.Var(&o.Binaries, "binary", "OS/ARCH=PATH: the gatehouse CLI built for OS/ARCH. Repeatable.")
	fs.Var(&o.Include, "include", "PATH: a file put beside the binary in every CLI archive (LICENSE, README.md). Repeatable.")
	fs.StringVar(&o.ImageIndex, "image-index", "", "The image index, an OCI image layout in a tar archive (make image's IMAGE_INDEX_ARCHIVE).")
	fs.StringVar(&o.SBOM, "sbom", "", "The image's SBOM (make image's IMAGE_SBOM).")
	fs.StringVar(&o.Listing, "listing", "", "The image's listing (make image's IMAGE_LISTING).")
	fs.StringVar(&o.Chart, "chart", "", "The chart as helm package wrote it, with version and appVersion set to the release's.")
	fs.Int64Var(&o.Epoch, "epoch", 0, "Every timestamp in the archives, in seconds since 1970 (the commit's time).")
	fs.StringVar(&o.SourceURI, "source", "git+https://github.com/gatehouse-dev/gatehouse", "The source repository, as provenance names it.")
	fs.StringVar(&o.Revision, "revision", "", "The commit built (git rev-parse HEAD).")
	fs.BoolVar(&o.Modified, "modified", false, "The work tree had changes the commit lacks: provenance says so.")
	fs.StringVar(&o.BuilderID, "builder-id", defaultBuilderID, "Who built it, as provenance names the builder (the release workflow passes its own).")
	fs.StringVar(&o.GoVersion, "go-version", "", "The Go toolchain that compiled the binaries (go env GOVERSION).")
	fs.Var(&o.Dependencies, "dependency", "URI=PATH: a build input recorded in provenance by its file's SHA-256 (go.sum, the Debian package locks). Repeatable.")
	fs.StringVar(&o.Cosign, "cosign", "cosign", "The cosign binary that signs checksums.txt.")
	o.Signing.addFlags(fs, "checksums.txt is left unsigned")
	_ = fs.Parse(args)
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return dist(o, os.Stdout)
}

// dist writes the release directory.
func dist(o distOptions, out io.Writer) error {
	n, err := namesOf(o.Version)
	if err != nil {
		return err
	}
	switch {
	case len(o.Binaries) == 0:
		return errors.New("no --binary given")
	case o.ImageIndex == "" || o.SBOM == "" || o.Listing == "" || o.Chart == "":
		return errors.New("--image-index, --sbom, --listing and --chart are required")
	case o.Revision == "":
		return errors.New("--revision is required")
	}
	if err := o.Signing.validate(); err != nil {
		return err
	}
	if err := cleanDist(o.Dist); err != nil {
		return err
	}
	epoch := time.Unix(o.Epoch, 0).UTC()
	var files []string // every file of the release, for checksums.txt

	platforms := make([]string, 0, len(o.Binaries))
	binaries := map[string]string{}
	for _, b := range o.Binaries {
		platform, path, ok := strings.Cut(b, "=")
		if !ok || strings.Count(platform, "/") != 1 {
			return fmt.Errorf("--binary %q: want OS/ARCH=PATH", b)
		}
		if _, dup := binaries[platform]; dup {
			return fmt.Errorf("--binary: %s given twice", platform)
		}
		binaries[platform] = path
		platforms = append(platforms, platform)
	}
	slices.Sort(platforms)
	for _, platform := range platforms {
		entries := []archiveEntry{{Name: "gatehouse", Source: binaries[platform], Mode: 0o755}}
		for _, inc := range o.Include {
			entries = append(entries, archiveEntry{Name: filepath.Base(inc), Source: inc, Mode: 0o644})
		}
		name := n.Archive(platform)
		if err := atomicfile.Write(filepath.Join(o.Dist, name), func(w io.Writer) error {
			return writeArchive(w, entries, epoch)
		}); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		files = append(files, name)
	}

	chart, err := os.ReadFile(o.Chart)
	if err != nil {
		return err
	}
	if err := checkChart(chart, n.Version); err != nil {
		return fmt.Errorf("%s: %w", o.Chart, err)
	}
	if err := atomicfile.Write(filepath.Join(o.Dist, n.Chart()), func(w io.Writer) error {
		return repackChart(w, chart, epoch)
	}); err != nil {
		return fmt.Errorf("%s: %w", n.Chart(), err)
	}
	files = append(files, n.Chart())

	for _, c := range []struct{ src, dst string }{{o.ImageIndex, n.ImageIndex()}, {o.SBOM, n.SBOM()}, {o.Listing, n.Listing()}} {
		if err := copyFile(c.src, filepath.Join(o.Dist, c.dst)); err != nil {
			return err
		}
		files = append(files, c.dst)
	}
	indexDigest, err := layoutIndexDigest(filepath.Join(o.Dist, n.ImageIndex()))
	if err != nil {
		return fmt.Errorf("%s: %w", o.ImageIndex, err)
	}

	statement, err := provenance(o, n, o.Dist, files, indexDigest, platforms)
	if err != nil {
		return fmt.Errorf("provenance: %w", err)
	}
	if err := os.WriteFile(filepath.Join(o.Dist, n.Provenance()), statement, 0o644); err != nil {
		return err
	}
	files = append(files, n.Provenance())

	sums, err := checksums(o.Dist, files)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.Dist, n.Checksums()), sums, 0o644); err != nil {
		return err
	}
	if o.Signing.enabled() {
		if err := signChecksums(o.Cosign, o.Signing, o.Dist, n); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "release %s in %s: image index %s\n", o.Version, o.Dist, indexDigest)
	for _, f := range append(files, n.Checksums()) {
		fmt.Fprintf(out, "  %s\n", f)
	}
	switch {
	case o.Signing.keyless():
		fmt.Fprintf(out, "  %s (keyless, signed as %s)\n", n.Bundle(), o.Signing.Identity)
	case o.Signing.enabled():
		fmt.Fprintf(out, "  %s, %s\n", n.Signature(), n.PublicKey())
	default:
		fmt.Fprintln(out, "  (checksums.txt is not signed: no key given)")
	}
	return nil
}

// cleanDist makes dir an empty directory, refusing to empty one that
// holds anything but an earlier release (a mistyped DIST must not cost
// anyone their files).
func cleanDist(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, "checksums.txt")); err != nil {
		return fmt.Errorf("%s holds files but no earlier release's checksums.txt: name an empty or new directory", dir)
	}
	for _, e := range entries {
		if e.IsDir() {
			return fmt.Errorf("%s holds a directory (%s), which no release has: name an empty or new directory", dir, e.Name())
		}
	}
	for _, e := range entries {
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// checkChart says whether the packaged chart carries the release's
// version as both its version and appVersion (the image tag it defaults
// to).
func checkChart(tgz []byte, version string) error {
	var chartYAML []byte
	err := eachTarEntry(tgz, func(name string, data []byte) error {
		if name == "gatehouse/Chart.yaml" {
			chartYAML = data
		}
		return nil
	})
	if err != nil {
		return err
	}
	if chartYAML == nil {
		return errors.New("no gatehouse/Chart.yaml: not the gatehouse chart")
	}
	var meta struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(chartYAML, &meta); err != nil {
		return err
	}
	if meta.Version != version || meta.AppVersion != version {
		return fmt.Errorf("chart version %q, appVersion %q: want both %q (helm package --version --app-version)", meta.Version, meta.AppVersion, version)
	}
	return nil
}

// layoutIndexDigest is the digest of the image index an OCI layout
// archive names in its index.json: what the registry will serve.
func layoutIndexDigest(path string) (string, error) {
	index, err := layoutFile(path, "index.json")
	if err != nil {
		return "", err
	}
	var top struct {
		Manifests []struct {
			MediaType string `json:"mediaType"`
			Digest    string `json:"digest"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(index, &top); err != nil {
		return "", fmt.Errorf("index.json: %w", err)
	}
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != "application/vnd.oci.image.index.v1+json" {
		return "", errors.New("index.json does not name exactly one image index")
	}
	return top.Manifests[0].Digest, nil
}

// layoutFile reads one small file of an OCI layout archive, skipping the
// rest unread.
func layoutFile(archive, name string) ([]byte, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("no %s in the archive", name)
		}
		if err != nil {
			return nil, err
		}
		if h.Name == name && h.Typeflag == tar.TypeReg && h.Size <= 1<<20 {
			return io.ReadAll(tr)
		}
	}
}

// checksums is checksums.txt: sha256sum's format, in name order.
func checksums(dir string, files []string) ([]byte, error) {
	sorted := slices.Clone(files)
	slices.Sort(sorted)
	var b strings.Builder
	for _, f := range sorted {
		sum, err := fileSHA256(filepath.Join(dir, f))
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, f)
	}
	return []byte(b.String()), nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return atomicfile.Write(dst, func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	})
}
