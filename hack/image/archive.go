package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// imageConfig is what the image's config says about running it.
type imageConfig struct {
	Entrypoint []string
	Cmd        []string
	Env        []string
	User       string
	WorkingDir string
	Labels     map[string]string
	Platform   v1.Platform
}

// buildImage makes a one-layer OCI image of fs. Every timestamp is
// created (the layer's files, the config's created and history), and the
// layer is compressed with Go's gzip at a fixed level, so the same inputs
// give the same digests (with the same Go release: compress/flate's
// output is not promised across releases).
func buildImage(fs *rootfs, cfg imageConfig, created time.Time) (v1.Image, error) {
	var layerTar bytes.Buffer
	if err := fs.writeTar(&layerTar, created); err != nil {
		return nil, fmt.Errorf("writing the layer: %w", err)
	}
	layerBytes := layerTar.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.BestCompression), tarball.WithCompressedCaching)
	if err != nil {
		return nil, err
	}

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	base, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	file := base.DeepCopy()
	file.Created = v1.Time{Time: created}
	file.OS = cfg.Platform.OS
	file.Architecture = cfg.Platform.Architecture
	file.Variant = cfg.Platform.Variant
	file.Config = v1.Config{
		Entrypoint: cfg.Entrypoint,
		Cmd:        cfg.Cmd,
		Env:        cfg.Env,
		User:       cfg.User,
		WorkingDir: cfg.WorkingDir,
		Labels:     cfg.Labels,
	}
	if img, err = mutate.ConfigFile(img, file); err != nil {
		return nil, err
	}
	return mutate.Append(img, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: created},
			CreatedBy: "hack/image (gatehouse)",
		},
	})
}

// Annotations that name the image in an archive's index.json. containerd
// (ctr images import, and so the CRI) names an imported image after
// io.containerd.image.name, which holds the whole reference; the OCI
// image-layout specification's org.opencontainers.image.ref.name is the
// tag alone, which tools reading OCI layouts (skopeo's oci-archive:,
// crane) look up.
const (
	annotationContainerdName = "io.containerd.image.name"
	annotationRefName        = "org.opencontainers.image.ref.name"
)

// dockerManifestEntry is one entry of a `docker save` archive's
// manifest.json. Written beside the OCI layout (as `docker save` of
// Docker 25 and later does), it lets `docker load` and crane's tarball
// reader (crane push) read the same archive; both formats point at the
// same blobs.
type dockerManifestEntry struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// imageBlobs adds img's manifest, config and layers to files (by blob
// path) and returns the manifest's digest, the config's path and the
// layers' paths.
func imageBlobs(files map[string][]byte, img v1.Image) (manifestDigest v1.Hash, configPath string, layerPaths []string, err error) {
	manifest, err := img.RawManifest()
	if err != nil {
		return
	}
	if manifestDigest, err = img.Digest(); err != nil {
		return
	}
	files[blobPath(manifestDigest)] = manifest
	config, err := img.RawConfigFile()
	if err != nil {
		return
	}
	configDigest, err := img.ConfigName()
	if err != nil {
		return
	}
	configPath = blobPath(configDigest)
	files[configPath] = config
	layers, err := img.Layers()
	if err != nil {
		return
	}
	for _, l := range layers {
		var d v1.Hash
		if d, err = l.Digest(); err != nil {
			return
		}
		var rc io.ReadCloser
		if rc, err = l.Compressed(); err != nil {
			return
		}
		var data []byte
		data, err = io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return
		}
		files[blobPath(d)] = data
		layerPaths = append(layerPaths, blobPath(d))
	}
	return
}

func blobPath(d v1.Hash) string { return "blobs/" + d.Algorithm + "/" + d.Hex }

// refAnnotations name the image in index.json for containerd and for
// OCI layout readers.
func refAnnotations(ref name.Tag) map[string]string {
	return map[string]string{
		annotationContainerdName: ref.Name(),
		annotationRefName:        ref.TagStr(),
	}
}

// writeArchive writes img as an OCI image layout in a tar archive (with
// a docker-style manifest.json beside it), named ref.
func writeArchive(w io.Writer, img v1.Image, ref name.Tag, created time.Time) error {
	files := map[string][]byte{}
	manifestDigest, configPath, layerPaths, err := imageBlobs(files, img)
	if err != nil {
		return err
	}
	mediaType, err := img.MediaType()
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	index := v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType:   mediaType,
			Size:        int64(len(files[blobPath(manifestDigest)])),
			Digest:      manifestDigest,
			Platform:    cf.Platform(),
			Annotations: refAnnotations(ref),
		}},
	}
	if files["index.json"], err = json.Marshal(index); err != nil {
		return err
	}
	files["oci-layout"] = []byte(`{"imageLayoutVersion":"1.0.0"}`)
	if files["manifest.json"], err = json.Marshal([]dockerManifestEntry{{
		Config:   configPath,
		RepoTags: []string{ref.Name()},
		Layers:   layerPaths,
	}}); err != nil {
		return err
	}
	return writeTarFiles(w, files, created)
}

// buildIndex puts every build's image under one OCI image index, each
// with its platform, in the order given.
func buildIndex(builds []platformBuild) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, b := range builds {
		p := b.Platform
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        b.Image,
			Descriptor: v1.Descriptor{Platform: &p},
		})
	}
	return idx, nil
}

// writeIndexArchive writes idx as an OCI image layout in a tar archive:
// index.json names the image index (as ref); the index, its manifests,
// configs and layers are blobs. This is what a registry is given
// (crane push of the unpacked layout pushes the index as it is, so the
// registry's digest is the listing's).
func writeIndexArchive(w io.Writer, idx v1.ImageIndex, ref name.Tag, created time.Time) error {
	files := map[string][]byte{}
	raw, err := idx.RawManifest()
	if err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	files[blobPath(digest)] = raw
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			return err
		}
		if _, _, _, err := imageBlobs(files, img); err != nil {
			return err
		}
	}
	top := v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType:   types.OCIImageIndex,
			Size:        int64(len(raw)),
			Digest:      digest,
			Annotations: refAnnotations(ref),
		}},
	}
	if files["index.json"], err = json.Marshal(top); err != nil {
		return err
	}
	files["oci-layout"] = []byte(`{"imageLayoutVersion":"1.0.0"}`)
	return writeTarFiles(w, files, created)
}

// writeTarFiles writes files in name order, each directory once before
// what it holds, every time set to created.
func writeTarFiles(w io.Writer, files map[string][]byte, created time.Time) error {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	tw := tar.NewWriter(w)
	dirs := map[string]bool{}
	for _, n := range names {
		if dir := filepath.Dir(n); dir != "." {
			for _, d := range []string{"blobs", dir} {
				if !dirs[d] {
					dirs[d] = true
					if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: created, Format: tar.FormatPAX}); err != nil {
						return err
					}
				}
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: 0o644, Size: int64(len(files[n])), ModTime: created, Format: tar.FormatPAX}); err != nil {
			return err
		}
		if _, err := tw.Write(files[n]); err != nil {
			return err
		}
	}
	return tw.Close()
}

// platformOf parses "os/arch[/variant]".
func platformOf(s string) (v1.Platform, error) {
	parts := strings.Split(s, "/")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return v1.Platform{}, fmt.Errorf("platform %q: want os/arch[/variant]", s)
	}
	p := v1.Platform{OS: parts[0], Architecture: parts[1]}
	if len(parts) == 3 {
		p.Variant = parts[2]
	}
	return p, nil
}
