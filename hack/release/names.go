package main

import (
	"fmt"
	"regexp"
	"strings"
)

// semver is what a release's version may be: vMAJOR.MINOR.PATCH with an
// optional pre-release (v0.2.0-rc.1), as Helm wants a chart's version.
var semver = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

// names are the files of one release in its directory.
type names struct {
	Version string // without the leading v: the chart's version, the image's tag
}

func namesOf(version string) (names, error) {
	if !semver.MatchString(version) {
		return names{}, fmt.Errorf("version %q: want vMAJOR.MINOR.PATCH[-PRERELEASE] (v0.2.0)", version)
	}
	return names{Version: strings.TrimPrefix(version, "v")}, nil
}

func (n names) Archive(platform string) string {
	return fmt.Sprintf("gatehouse_%s_%s.tar.gz", n.Version, strings.ReplaceAll(platform, "/", "_"))
}
func (n names) Chart() string         { return fmt.Sprintf("gatehouse-%s.tgz", n.Version) }
func (n names) ImageIndex() string    { return fmt.Sprintf("gatehouse-image_%s.oci.tar", n.Version) }
func (n names) SBOM() string          { return fmt.Sprintf("gatehouse-image_%s.spdx.json", n.Version) }
func (n names) Listing() string       { return fmt.Sprintf("gatehouse-image_%s.contents.txt", n.Version) }
func (n names) Provenance() string    { return fmt.Sprintf("gatehouse_%s.intoto.json", n.Version) }
func (names) Checksums() string       { return "checksums.txt" }
func (names) Signature() string       { return "checksums.txt.sig" }
func (names) PublicKey() string       { return "cosign.pub" }
func (names) Bundle() string          { return "checksums.txt.sigstore.json" }
func (n names) Tag() string           { return n.Version }
func (names) ImageRepository() string { return "gatehouse" }
func (names) ChartRepository() string { return "charts" }
