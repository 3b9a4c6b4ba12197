package main

import (
	"bytes"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The SPDX 2.3 JSON document (https://spdx.github.io/spdx-spec/v2.3/),
// only the fields written here.
type spdxDocument struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreationInfo   `json:"creationInfo"`
	DocumentDescribes []string           `json:"documentDescribes"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	Name             string            `json:"name"`
	SPDXID           string            `json:"SPDXID"`
	VersionInfo      string            `json:"versionInfo,omitempty"`
	Supplier         string            `json:"supplier,omitempty"`
	DownloadLocation string            `json:"downloadLocation"`
	FilesAnalyzed    bool              `json:"filesAnalyzed"`
	Checksums        []spdxChecksum    `json:"checksums,omitempty"`
	LicenseConcluded string            `json:"licenseConcluded"`
	LicenseDeclared  string            `json:"licenseDeclared"`
	CopyrightText    string            `json:"copyrightText"`
	PrimaryPurpose   string            `json:"primaryPackagePurpose,omitempty"`
	ExternalRefs     []spdxExternalRef `json:"externalRefs,omitempty"`
	Comment          string            `json:"comment,omitempty"`
}

type spdxChecksum struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"checksumValue"`
}

type spdxExternalRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

// spdxIDChars are the characters an SPDX identifier may hold after
// "SPDXRef-".
var spdxIDChars = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

func spdxID(parts ...string) string {
	return "SPDXRef-" + spdxIDChars.ReplaceAllString(strings.Join(parts, "-"), "-")
}

func purlRef(purl string) []spdxExternalRef {
	return []spdxExternalRef{{Category: "PACKAGE-MANAGER", Type: "purl", Locator: purl}}
}

// writeSBOM writes an SPDX 2.3 document describing the image (the index
// when there is one, else the one image): each platform's image
// CONTAINS its Debian packages (purl pkg:deb/debian/NAME@VERSION?arch=)
// and its Go binaries, and each Go binary CONTAINS the modules compiled
// into it (purl pkg:golang/PATH@VERSION). Everything in it is derived
// from the build, so the same build gives the same document (its time
// is SOURCE_DATE_EPOCH).
func writeSBOM(w io.Writer, ref name.Tag, index v1.ImageIndex, builds []platformBuild, created time.Time) error {
	repo := ref.Context().Name()
	var topDigest v1.Hash
	var err error
	if index != nil {
		topDigest, err = index.Digest()
	} else {
		topDigest, err = builds[0].Image.Digest()
	}
	if err != nil {
		return err
	}
	ociPurl := func(d v1.Hash, arch string) string {
		p := fmt.Sprintf("pkg:oci/%s@%s?repository_url=%s&tag=%s",
			ref.Context().RepositoryStr()[strings.LastIndex(ref.Context().RepositoryStr(), "/")+1:],
			url.QueryEscape(d.String()), url.QueryEscape(repo), url.QueryEscape(ref.TagStr()))
		if arch != "" {
			p += "&arch=" + arch
		}
		return p
	}
	doc := spdxDocument{
		SPDXVersion:       "SPDX-2.3",
		DataLicense:       "CC0-1.0",
		SPDXID:            "SPDXRef-DOCUMENT",
		Name:              ref.Name(),
		DocumentNamespace: fmt.Sprintf("https://github.com/gatehouse-dev/gatehouse/spdx/%s/%s", url.PathEscape(ref.Name()), topDigest.Hex),
		CreationInfo: spdxCreationInfo{
			Created:  created.UTC().Format(time.RFC3339),
			Creators: []string{"Tool: gatehouse-hack-image", "Organization: Gatehouse"},
		},
	}
	topID := spdxID("image", topDigest.Hex[:16])
	doc.DocumentDescribes = []string{topID}
	doc.Packages = append(doc.Packages, spdxPackage{
		Name: repo, SPDXID: topID, VersionInfo: ref.TagStr(),
		DownloadLocation: "NOASSERTION", Checksums: []spdxChecksum{{"SHA256", topDigest.Hex}},
		LicenseConcluded: "NOASSERTION", LicenseDeclared: "NOASSERTION", CopyrightText: "NOASSERTION",
		PrimaryPurpose: "CONTAINER", ExternalRefs: purlRef(ociPurl(topDigest, "")),
	})
	doc.Relationships = append(doc.Relationships, spdxRelationship{"SPDXRef-DOCUMENT", "DESCRIBES", topID})

	seen := map[string]bool{}
	addPackage := func(p spdxPackage) {
		if !seen[p.SPDXID] {
			seen[p.SPDXID] = true
			doc.Packages = append(doc.Packages, p)
		}
	}
	for _, b := range builds {
		arch := b.Platform.Architecture
		imgID := topID
		if index != nil {
			d, err := b.Image.Digest()
			if err != nil {
				return err
			}
			imgID = spdxID("image", arch, d.Hex[:16])
			addPackage(spdxPackage{
				Name: repo + " (" + b.Platform.String() + ")", SPDXID: imgID, VersionInfo: ref.TagStr(),
				DownloadLocation: "NOASSERTION", Checksums: []spdxChecksum{{"SHA256", d.Hex}},
				LicenseConcluded: "NOASSERTION", LicenseDeclared: "NOASSERTION", CopyrightText: "NOASSERTION",
				PrimaryPurpose: "CONTAINER", ExternalRefs: purlRef(ociPurl(d, arch)),
			})
			doc.Relationships = append(doc.Relationships, spdxRelationship{topID, "CONTAINS", imgID})
		}
		for _, d := range b.Debs {
			id := spdxID("deb", d.Package, d.Arch, d.Version)
			addPackage(spdxPackage{
				Name: d.Package, SPDXID: id, VersionInfo: d.Version, Supplier: "Organization: Debian",
				DownloadLocation: d.URL(), Checksums: []spdxChecksum{{"SHA256", d.SHA256}},
				LicenseConcluded: "NOASSERTION", LicenseDeclared: "NOASSERTION", CopyrightText: "NOASSERTION",
				ExternalRefs: purlRef(d.Purl()),
				Comment:      "Files taken: those listed with this package in the image listing; its copyright file is in the image at /usr/share/doc/" + d.Package + "/copyright.",
			})
			doc.Relationships = append(doc.Relationships, spdxRelationship{imgID, "CONTAINS", id})
		}
		paths := make([]string, 0, len(b.Rootfs.entries))
		for p := range b.Rootfs.entries {
			paths = append(paths, p)
		}
		slices.Sort(paths)
		for _, p := range paths {
			e := b.Rootfs.entries[p]
			info, err := buildinfo.Read(bytes.NewReader(e.Data))
			if err != nil || e.Deb != nil {
				continue // not a Go binary of ours
			}
			binID := spdxID("go-binary", arch, p)
			addPackage(spdxPackage{
				Name: p, SPDXID: binID, VersionInfo: info.Main.Version,
				DownloadLocation: "NOASSERTION", Checksums: []spdxChecksum{{"SHA256", e.sha256()}},
				LicenseConcluded: "NOASSERTION", LicenseDeclared: "NOASSERTION", CopyrightText: "NOASSERTION",
				PrimaryPurpose: "APPLICATION", ExternalRefs: purlRef(goPurl(info.Main.Path, info.Main.Version)),
				Comment: "Built with " + info.GoVersion + " for " + b.Platform.String(),
			})
			doc.Relationships = append(doc.Relationships, spdxRelationship{imgID, "CONTAINS", binID})
			for _, dep := range info.Deps {
				m := dep
				if dep.Replace != nil {
					m = dep.Replace
				}
				id := spdxID("go", m.Path, m.Version)
				addPackage(spdxPackage{
					Name: m.Path, SPDXID: id, VersionInfo: m.Version,
					DownloadLocation: "https://proxy.golang.org/" + m.Path + "/@v/" + m.Version + ".zip",
					LicenseConcluded: "NOASSERTION", LicenseDeclared: "NOASSERTION", CopyrightText: "NOASSERTION",
					ExternalRefs: purlRef(goPurl(m.Path, m.Version)),
					Comment:      "go.sum " + m.Sum,
				})
				doc.Relationships = append(doc.Relationships, spdxRelationship{binID, "CONTAINS", id})
			}
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

// goPurl is the package URL of a Go module: pkg:golang/PATH@VERSION,
// each path segment escaped.
func goPurl(path, version string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		segs[i] = purlEscape(s)
	}
	p := "pkg:golang/" + strings.Join(segs, "/")
	if version != "" && version != "(devel)" {
		p += "@" + purlEscape(version)
	}
	return p
}

// purlEscape percent-encodes everything but unreserved characters, as the
// package-URL specification asks of names and versions: "+" becomes
// "%2B" (2.6.12-1%2Bdeb12u4), an epoch's ":" "%3A".
func purlEscape(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
