package main

import (
	"archive/tar"
	"bytes"
	"debug/buildinfo"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// writeListing writes what is inside the image, for a reader deciding
// whether to trust it and for a scanner matching it against advisories:
// the reference and digests (the index's, when there is one, is what a
// registry serves for the tag), then for each platform every file with
// its size and sha256 and the Debian package (with version) it comes
// from, the Debian packages once each (with the .deb's sha256), and every
// Go module compiled into each Go binary.
func writeListing(w io.Writer, ref name.Tag, index v1.ImageIndex, builds []platformBuild, origins [][2]string) error {
	fmt.Fprintf(w, "# The contents of the image, written by hack/image (make image).\n")
	fmt.Fprintf(w, "reference  %s\n", ref.Name())
	if index != nil {
		d, err := index.Digest()
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "index      %s\n", d)
	}
	for _, b := range builds {
		if err := writeImageListing(w, b, origins); err != nil {
			return err
		}
	}
	return nil
}

func writeImageListing(w io.Writer, b platformBuild, origins [][2]string) error {
	img, rfs := b.Image, b.Rootfs
	manifestDigest, err := img.Digest()
	if err != nil {
		return err
	}
	configDigest, err := img.ConfigName()
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}

	fmt.Fprintf(w, "\n# Image for %s\n", cf.Platform())
	fmt.Fprintf(w, "platform   %s\n", cf.Platform())
	fmt.Fprintf(w, "digest     %s\n", manifestDigest)
	fmt.Fprintf(w, "config     %s\n", configDigest)
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		diff, err := l.DiffID()
		if err != nil {
			return err
		}
		size, err := l.Size()
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "layer      %s (%d bytes compressed; uncompressed %s)\n", d, size, diff)
	}
	fmt.Fprintf(w, "created    %s\n", cf.Created.UTC().Format("2006-01-02T15:04:05Z"))
	fmt.Fprintf(w, "user       %s\n", cf.Config.User)
	fmt.Fprintf(w, "entrypoint %q\n", cf.Config.Entrypoint)
	fmt.Fprintf(w, "cmd        %q\n", cf.Config.Cmd)
	fmt.Fprintf(w, "env        %q\n", cf.Config.Env)
	labelKeys := make([]string, 0, len(cf.Config.Labels))
	for k := range cf.Config.Labels {
		labelKeys = append(labelKeys, k)
	}
	slices.Sort(labelKeys)
	for _, k := range labelKeys {
		fmt.Fprintf(w, "label      %s=%s\n", k, cf.Config.Labels[k])
	}

	owners := packageOwners(rfs, origins)
	versions := packageVersions(owners)
	for _, e := range rfs.entries {
		if e.Deb != nil {
			owners[e.Path] = e.Deb.Package
			versions[e.Deb.Package] = e.Deb.Version
		}
	}

	fmt.Fprintf(w, "\n# Files: mode owner size sha256 path [-> link target] [Debian package version]\n")
	entries := rfs.sorted()
	for _, e := range entries {
		pkg := ""
		if p := owners[e.Path]; p != "" {
			pkg = "  [" + p + " " + versions[p] + "]"
		}
		switch e.Type {
		case tar.TypeDir:
			fmt.Fprintf(w, "d%s 0:0 %10s %-64s %s/\n", modeString(e.Mode), "-", "-", e.Path)
		case tar.TypeSymlink:
			fmt.Fprintf(w, "l%s 0:0 %10s %-64s %s -> %s%s\n", modeString(e.Mode), "-", "-", e.Path, e.Target, pkg)
		case tar.TypeReg:
			fmt.Fprintf(w, "-%s 0:0 %10d %s %s%s\n", modeString(e.Mode), len(e.Data), e.sha256(), e.Path, pkg)
		}
	}

	fmt.Fprintf(w, "\n# Debian packages the files come from: package version [architecture sha256-of-the-.deb path]\n")
	locked := map[string]lockEntry{}
	for _, d := range b.Debs {
		locked[d.Package] = d
	}
	pkgs := make([]string, 0, len(versions))
	for p := range versions {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	if len(pkgs) == 0 {
		fmt.Fprintf(w, "(none)\n")
	}
	for _, p := range pkgs {
		if l, ok := locked[p]; ok {
			fmt.Fprintf(w, "%s %s %s %s %s\n", p, l.Version, l.Arch, l.SHA256, l.Path)
			continue
		}
		fmt.Fprintf(w, "%s %s\n", p, versions[p])
	}

	for _, e := range entries {
		if e.Type != tar.TypeReg {
			continue
		}
		info, err := buildinfo.Read(bytes.NewReader(e.Data))
		if err != nil {
			continue // not a Go binary
		}
		fmt.Fprintf(w, "\n# Go binary %s: %s, module %s %s\n", e.Path, info.GoVersion, info.Main.Path, info.Main.Version)
		for _, s := range info.Settings {
			fmt.Fprintf(w, "build %s=%s\n", s.Key, s.Value)
		}
		for _, d := range info.Deps {
			m := d
			if d.Replace != nil {
				m = d.Replace
			}
			line := fmt.Sprintf("dep %s %s %s", d.Path, m.Version, m.Sum)
			if d.Replace != nil {
				line = fmt.Sprintf("dep %s => %s %s %s", d.Path, m.Path, m.Version, m.Sum)
			}
			fmt.Fprintln(w, strings.TrimSpace(line))
		}
	}
	return nil
}

func modeString(m int64) string {
	const rwx = "rwxrwxrwx"
	b := []byte("---------")
	for i := range 9 {
		if m&(1<<(8-i)) != 0 {
			b[i] = rwx[i]
		}
	}
	if m&0o1000 != 0 {
		if b[8] == 'x' {
			b[8] = 't'
		} else {
			b[8] = 'T'
		}
	}
	return string(b)
}

// packageOwners maps each file or link copied from the host to the
// Debian package that installed it, asking dpkg. On a merged-/usr system
// dpkg may know a file under either /lib/... or /usr/lib/...: both are
// asked. Files dpkg does not own (generated ones such as
// ca-certificates.crt) take their package from origins. Without dpkg (not
// Debian) the map is empty and the listing says so by omission.
func packageOwners(rfs *rootfs, origins [][2]string) map[string]string {
	owners := map[string]string{}
	for _, o := range origins {
		owners[o[0]] = o[1]
	}
	if _, err := exec.LookPath("dpkg-query"); err != nil {
		return owners
	}
	for _, e := range rfs.entries {
		if e.Source == "" || e.Deb != nil || owners[e.Path] != "" {
			continue
		}
		// A link standing for a directory (/lib -> usr/lib of the merged
		// /usr) is the base system's layout: dpkg would answer with every
		// package that installs something beneath it.
		if info, err := os.Stat(e.Source); err == nil && info.IsDir() {
			continue
		}
		candidates := []string{e.Source}
		if rest, ok := strings.CutPrefix(e.Source, "/usr"); ok {
			candidates = append(candidates, rest)
		} else {
			candidates = append(candidates, "/usr"+e.Source)
		}
		for _, c := range candidates {
			if p := dpkgOwner(c); p != "" {
				owners[e.Path] = p
				break
			}
		}
	}
	return owners
}

// dpkgOwner is the package dpkg says installed exactly path, or "".
func dpkgOwner(path string) string {
	out, err := exec.Command("dpkg-query", "-S", path).Output()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(out), "\n") {
		// "libc6:amd64: /lib/x86_64-linux-gnu/libc.so.6"; diversions
		// ("diversion by ...") have no ": /" after the package.
		pkgs, file, ok := strings.Cut(line, ": ")
		if !ok || file != path || strings.HasPrefix(line, "diversion") {
			continue
		}
		// A file shared by several packages ("a, b: path"): the first.
		pkg, _, _ := strings.Cut(pkgs, ",")
		return strings.TrimSpace(pkg)
	}
	return ""
}

// packageVersions asks dpkg for the installed version of every package
// named in owners.
func packageVersions(owners map[string]string) map[string]string {
	versions := map[string]string{}
	for _, p := range owners {
		if _, ok := versions[p]; ok {
			continue
		}
		versions[p] = "(version unknown)"
		out, err := exec.Command("dpkg-query", "-W", "-f", "${Version}", p).Output()
		if err == nil && len(out) > 0 {
			versions[p] = strings.TrimSpace(string(out))
		}
	}
	return versions
}
