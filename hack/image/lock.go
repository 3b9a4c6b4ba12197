package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ulikunitz/xz"

	"github.com/gatehouse-dev/gatehouse/hack/internal/atomicfile"
)

// The Debian archives the image's packages come from: trixie (Debian 13),
// with its point-release updates and its security updates. A newer version
// in a later suite wins, so a security fix is taken as soon as the lock is
// regenerated. trixie carries haproxy 3.0 LTS, the branch haptic's users
// run (bookworm's 2.6 stays supported where a node's haproxy is 2.6).
var debianSuites = []struct{ Archive, Suite string }{
	{"debian", "trixie"},
	{"debian", "trixie-updates"},
	{"debian-security", "trixie-security"},
}

// usrMergePackage holds the links of the merged /usr (/lib64 -> usr/lib64).
const usrMergePackage = "base-files"

// debianRelease is the suites' Debian version, for package URLs.
const debianRelease = "13"

// debianMirror is where the archives are: DEBIAN_MIRROR overrides it
// (a local mirror, or a snapshot service holding versions the live
// archive no longer serves); the lock keeps the path below it.
func debianMirror() string {
	if m := os.Getenv("DEBIAN_MIRROR"); m != "" {
		return strings.TrimRight(m, "/")
	}
	return "http://deb.debian.org"
}

// A lockEntry pins one Debian package of one architecture: the .deb at
// Path (below the mirror: "debian-security/pool/updates/main/h/haproxy/
// haproxy_2.6.12-1+deb12u4_arm64.deb") must have exactly SHA256. As
// apt does, the lock trusts the transport for nothing: the sha256 comes
// from a Packages index whose own sha256 is in the suite's InRelease,
// whose signature gpgv checks against Debian's archive keyring.
type lockEntry struct {
	Package, Version, Arch, SHA256, Path string
}

func (l lockEntry) String() string {
	return fmt.Sprintf("%s %s %s %s %s", l.Package, l.Version, l.Arch, l.SHA256, l.Path)
}

// URL is where the .deb is downloaded from.
func (l lockEntry) URL() string {
	u := url.URL{Path: "/" + l.Path}
	return debianMirror() + u.EscapedPath()
}

// Purl is the package URL a scanner matches advisories with.
func (l lockEntry) Purl() string {
	return fmt.Sprintf("pkg:deb/debian/%s@%s?arch=%s&distro=debian-"+debianRelease, purlEscape(l.Package), purlEscape(l.Version), l.Arch)
}

// lockPath is the lock of one architecture in dir.
func lockPath(dir, arch string) string { return filepath.Join(dir, arch+".lock") }

// readLock reads a lock file: "package version arch sha256 path" a line,
// "#" comments.
func readLock(file string) ([]lockEntry, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w (make image-lock writes it)", err)
	}
	var out []lockEntry
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 5 || len(f[3]) != 64 || strings.Contains(f[4], "..") || strings.HasPrefix(f[4], "/") {
			return nil, fmt.Errorf("%s:%d: want: package version arch sha256 path", file, n+1)
		}
		out = append(out, lockEntry{Package: f[0], Version: f[1], Arch: f[2], SHA256: f[3], Path: f[4]})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no package", file)
	}
	return out, nil
}

func writeLock(file, arch string, entries []lockEntry, roots []string) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# The Debian packages of the Gatehouse image for linux/%s, pinned by\n", arch)
	fmt.Fprintf(&b, "# version and sha256: the packages holding %s\n", strings.Join(roots, ", "))
	fmt.Fprintf(&b, "# and every shared library they load. Written by `make image-lock`\n")
	fmt.Fprintf(&b, "# from the Packages indexes of")
	for _, s := range debianSuites {
		fmt.Fprintf(&b, " %s", s.Suite)
	}
	fmt.Fprintf(&b, "; do not edit.\n# package version architecture sha256 path-below-the-mirror\n")
	slices.SortFunc(entries, func(a, b lockEntry) int { return strings.Compare(a.Package, b.Package) })
	for _, e := range entries {
		fmt.Fprintln(&b, e)
	}
	return atomicfile.Write(file, func(w io.Writer) error { _, err := w.Write(b.Bytes()); return err })
}

// debCache downloads and unpacks locked packages, keeping each verified
// .deb in Dir by file name so that a second build reads no network.
type debCache struct {
	Dir string
}

var httpClient = &http.Client{Timeout: 5 * time.Minute}

func httpGet(u string) ([]byte, error) {
	resp, err := httpClient.Get(u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 1<<30))
}

// fetch returns the package's unpacked files, downloading the .deb
// unless the cache holds it. A .deb whose sha256 is not the lock's is
// refused (and a cached one replaced).
func (c debCache) fetch(e lockEntry) (*debPackage, error) {
	file := filepath.Join(c.Dir, path.Base(e.Path))
	data, err := os.ReadFile(file)
	if err != nil || sha256Hex(data) != e.SHA256 {
		if data, err = httpGet(e.URL()); err != nil {
			return nil, fmt.Errorf("%s %s: %w (if the archive dropped this version, run make image-lock)", e.Package, e.Version, err)
		}
		if got := sha256Hex(data); got != e.SHA256 {
			return nil, fmt.Errorf("%s: sha256 %s, the lock says %s", e.URL(), got, e.SHA256)
		}
		if err := atomicfile.Write(file, func(w io.Writer) error { _, err := w.Write(data); return err }); err != nil {
			return nil, err
		}
	}
	files, err := readDeb(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &debPackage{Lock: e, Files: files}, nil
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// A universe is the files of a set of packages, by path, each with the
// package it comes from.
type universe struct {
	files map[string]debFile
	owner map[string]*debPackage
}

func newUniverse(pkgs []*debPackage) (*universe, error) {
	u := &universe{files: map[string]debFile{}, owner: map[string]*debPackage{}}
	for _, p := range pkgs {
		for fp, f := range p.Files {
			if old, ok := u.files[fp]; ok && f.Type != tar.TypeDir {
				if old.Type != f.Type || old.Target != f.Target || !bytes.Equal(old.Data, f.Data) {
					return nil, fmt.Errorf("%s: in both %s and %s, differently", fp, u.owner[fp].Lock.Package, p.Lock.Package)
				}
				continue
			}
			if _, ok := u.files[fp]; !ok {
				u.files[fp] = f
				u.owner[fp] = p
			}
		}
	}
	return u, nil
}

// resolve follows p through the packages' own links, as the kernel and
// the loader will inside the image: every link met and the file at the
// end, which must be a regular file.
func (u *universe) resolve(p string) (links []string, file string, err error) {
	for range 40 {
		p = path.Clean(p)
		parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
		moved := false
		for i := range parts {
			prefix := "/" + strings.Join(parts[:i+1], "/")
			f, ok := u.files[prefix]
			if !ok {
				return nil, "", fmt.Errorf("%s: no package has it", p)
			}
			if f.Type == tar.TypeSymlink {
				links = append(links, prefix)
				target := f.Target
				if !path.IsAbs(target) {
					target = path.Join(path.Dir(prefix), target)
				}
				p = path.Join(append([]string{target}, parts[i+1:]...)...)
				moved = true
				break
			}
			if i == len(parts)-1 {
				if f.Type != tar.TypeReg {
					return nil, "", fmt.Errorf("%s: not a regular file", p)
				}
				return links, prefix, nil
			}
			if f.Type != tar.TypeDir {
				return nil, "", fmt.Errorf("%s: not a directory", prefix)
			}
		}
		if !moved {
			break
		}
	}
	return nil, "", fmt.Errorf("%s: too many levels of symbolic links", p)
}

// libraryDirs are the directories Debian's dynamic loader searches
// without an ld.so.cache (the image has none): the multiarch directories
// first, as its built-in search path.
func libraryDirs(arch string) []string {
	triplet := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[arch]
	return []string{"/lib/" + triplet, "/usr/lib/" + triplet, "/lib", "/usr/lib"}
}

// closure returns the paths (links and files) that the files at roots
// need to run: for an ELF file, its program interpreter and every
// DT_NEEDED library, found in the library directories, transitively.
// What a program may dlopen() at run time is not in its headers: the
// image test runs haproxy -c in the image's files to catch that.
func (u *universe) closure(roots []string, arch string) ([]string, error) {
	keep := map[string]bool{}
	var queue []string
	add := func(p string) error {
		links, file, err := u.resolve(p)
		if err != nil {
			return err
		}
		for _, l := range links {
			keep[l] = true
		}
		if !keep[file] {
			keep[file] = true
			queue = append(queue, file)
		}
		return nil
	}
	for _, r := range roots {
		if err := add(r); err != nil {
			return nil, err
		}
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		f, err := elf.NewFile(bytes.NewReader(u.files[p].Data))
		if err != nil {
			continue // not ELF
		}
		needs, err := f.ImportedLibraries()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if interp := elfInterpreter(f); interp != "" {
			if err := add(interp); err != nil {
				return nil, fmt.Errorf("%s's interpreter: %w", p, err)
			}
		}
		for _, lib := range needs {
			if strings.Contains(lib, "/") {
				return nil, fmt.Errorf("%s needs %s by path", p, lib)
			}
			var found bool
			for _, d := range libraryDirs(arch) {
				if _, _, err := u.resolve(path.Join(d, lib)); err == nil {
					if err := add(path.Join(d, lib)); err != nil {
						return nil, err
					}
					found = true
					break
				}
			}
			if !found {
				return nil, fmt.Errorf("%s needs %s: no locked package has it", p, lib)
			}
		}
	}
	out := make([]string, 0, len(keep))
	for p := range keep {
		out = append(out, p)
	}
	sort.Strings(out)
	return out, nil
}

func elfInterpreter(f *elf.File) string {
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err == nil {
				return strings.TrimRight(string(b), "\x00")
			}
		}
	}
	return ""
}

// A debRoot is a file the image takes from a package: --deb=PACKAGE:PATH.
type debRoot struct{ Package, Path string }

func parseDebRoots(list []string) ([]debRoot, error) {
	var out []debRoot
	for _, s := range list {
		pkg, p, ok := strings.Cut(s, ":")
		if !ok || pkg == "" || !path.IsAbs(p) {
			return nil, fmt.Errorf("--deb %q: want PACKAGE:/PATH", s)
		}
		out = append(out, debRoot{pkg, path.Clean(p)})
	}
	return out, nil
}

// caPackage holds the Mozilla trust roots the CA bundle is made of.
const caPackage = "ca-certificates"

// caBundle concatenates the package's certificates as
// update-ca-certificates does with the default configuration (every
// mozilla/*.crt, in name order), which is what Debian's
// /etc/ssl/certs/ca-certificates.crt holds.
func caBundle(p *debPackage) ([]byte, error) {
	var names []string
	for fp, f := range p.Files {
		if f.Type == tar.TypeReg && strings.HasPrefix(fp, "/usr/share/ca-certificates/mozilla/") && strings.HasSuffix(fp, ".crt") {
			names = append(names, fp)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s %s has no mozilla/*.crt", p.Lock.Package, p.Lock.Version)
	}
	sort.Strings(names)
	var b bytes.Buffer
	for _, n := range names {
		data := p.Files[n].Data
		b.Write(data)
		if !bytes.HasSuffix(data, []byte("\n")) {
			b.WriteByte('\n')
		}
	}
	return b.Bytes(), nil
}

// archiveKeyring is Debian's archive keyring (package
// debian-archive-keyring), which signs every suite's InRelease.
var archiveKeyring = "/usr/share/keyrings/debian-archive-keyring.gpg"

// fetchIndex downloads one suite's Packages index for arch, verified
// through the suite's signed InRelease.
func fetchIndex(archive, suite, arch string) ([]stanza, error) {
	base := fmt.Sprintf("%s/%s/dists/%s/", debianMirror(), archive, suite)
	release, err := httpGet(base + "InRelease")
	if err != nil {
		return nil, err
	}
	if err := verifyInRelease(release); err != nil {
		return nil, fmt.Errorf("%sInRelease: %w", base, err)
	}
	name := "main/binary-" + arch + "/Packages.xz"
	u := base + name
	data, err := httpGet(u)
	if err != nil {
		return nil, err
	}
	if want := releaseSHA256(release, name); want == "" || want != sha256Hex(data) {
		return nil, fmt.Errorf("%s: sha256 %s, InRelease says %q", u, sha256Hex(data), want)
	}
	xr, err := xz.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	st, err := parsePackages(xr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	for _, s := range st {
		s["Archive"] = archive
	}
	return st, nil
}

// newestPackages keeps, per package name, the stanza with the highest
// version among the suites' indexes.
func newestPackages(indexes [][]stanza) map[string]stanza {
	best := map[string]stanza{}
	for _, idx := range indexes {
		for _, s := range idx {
			if old, ok := best[s["Package"]]; !ok || compareVersions(s["Version"], old["Version"]) > 0 {
				best[s["Package"]] = s
			}
		}
	}
	return best
}

// generateLock pins, for arch, the packages that hold the roots and the
// CA bundle, and every package that supplies a library they load:
// candidates are the roots' Depends and Pre-Depends, transitively
// (newest version of each in the suites); all of them are unpacked, the
// ELF closure is taken over their files, and only packages with a file
// in it are written. Every candidate is verified against the index's
// sha256 as it is downloaded.
func generateLock(cache debCache, index map[string]stanza, roots []debRoot, withCA bool, arch string) ([]lockEntry, error) {
	entryOf := func(name string) (lockEntry, bool) {
		s, ok := index[name]
		if !ok {
			return lockEntry{}, false
		}
		return lockEntry{Package: name, Version: s["Version"], Arch: s["Architecture"], SHA256: s["SHA256"],
			Path: s["Archive"] + "/" + s["Filename"]}, true
	}
	want := map[string]bool{}
	var queue []string
	for _, r := range roots {
		queue = append(queue, r.Package)
	}
	if withCA {
		queue = append(queue, caPackage)
	}
	// trixie's /usr is merged: libc6 ships the loader as
	// /usr/lib64/ld-linux-x86-64.so.2, and /lib64 (the path in every
	// program's PT_INTERP), /lib, /bin and /sbin are base-files' links into
	// /usr. Essential, so no package depends on it; the closure keeps only
	// the links a kept path goes through.
	queue = append(queue, usrMergePackage)
	var pkgs []*debPackage
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if want[name] {
			continue
		}
		want[name] = true
		e, ok := entryOf(name)
		if !ok {
			// A virtual package or one of another component: nothing to
			// unpack; a library it stood for shows up as missing below.
			continue
		}
		p, err := cache.fetch(e)
		if err != nil {
			return nil, err
		}
		pkgs = append(pkgs, p)
		s := index[name]
		queue = append(queue, dependsNames(s["Pre-Depends"])...)
		queue = append(queue, dependsNames(s["Depends"])...)
	}
	u, err := newUniverse(pkgs)
	if err != nil {
		return nil, err
	}
	paths := make([]string, 0, len(roots))
	for _, r := range roots {
		paths = append(paths, r.Path)
	}
	needed, err := u.closure(paths, arch)
	if err != nil {
		return nil, err
	}
	used := map[string]lockEntry{}
	for _, p := range needed {
		o := u.owner[p]
		used[o.Lock.Package] = o.Lock
	}
	if withCA {
		e, _ := entryOf(caPackage)
		used[caPackage] = e
	}
	out := make([]lockEntry, 0, len(used))
	for _, e := range used {
		out = append(out, e)
	}
	return out, nil
}

// runLock is `image lock`: regenerates DIR/<arch>.lock for every
// --platform from the live indexes.
func runLock(o options, out io.Writer) error {
	if o.DebLock == "" {
		return errors.New("lock: give --deb-lock=DIR")
	}
	roots, err := parseDebRoots(o.Debs)
	if err != nil {
		return err
	}
	if len(o.Platforms) == 0 || len(roots) == 0 || o.DebCache == "" {
		return errors.New("lock: give --platform (repeatable), --deb and --deb-cache")
	}
	for _, plat := range o.Platforms {
		pl, err := platformOf(plat)
		if err != nil {
			return err
		}
		var indexes [][]stanza
		for _, s := range debianSuites {
			idx, err := fetchIndex(s.Archive, s.Suite, pl.Architecture)
			if err != nil {
				return err
			}
			indexes = append(indexes, idx)
		}
		entries, err := generateLock(debCache{o.DebCache}, newestPackages(indexes), roots, o.CABundle != "", pl.Architecture)
		if err != nil {
			return fmt.Errorf("%s: %w", plat, err)
		}
		var names []string
		for _, r := range roots {
			names = append(names, r.Path)
		}
		if o.CABundle != "" {
			names = append(names, o.CABundle)
		}
		file := lockPath(o.DebLock, pl.Architecture)
		if err := writeLock(file, pl.Architecture, entries, names); err != nil {
			return err
		}
		fmt.Fprintf(out, "%s: %d packages\n", file, len(entries))
	}
	return nil
}

// verifyInRelease checks InRelease's OpenPGP signature with gpgv and
// Debian's archive keyring: without it, the checksums below it prove
// nothing.
func verifyInRelease(release []byte) error {
	if _, err := os.Stat(archiveKeyring); err != nil {
		return fmt.Errorf("%w: install debian-archive-keyring (and gpgv) to verify the indexes", err)
	}
	cmd := exec.Command("gpgv", "--keyring", archiveKeyring, "-")
	cmd.Stdin = bytes.NewReader(release)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("gpgv: %v: %s", err, out)
	}
	return nil
}

// releaseSHA256 is the sha256 that a Release file's SHA256 section gives
// for name (" <sha256> <size> main/binary-amd64/Packages.xz"). Only the
// signed part counts: everything before the signature's end marker.
func releaseSHA256(release []byte, name string) string {
	text, _, _ := strings.Cut(string(release), "-----BEGIN PGP SIGNATURE-----")
	inSHA := false
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, " ") {
			inSHA = strings.HasPrefix(line, "SHA256:")
			continue
		}
		if f := strings.Fields(line); inSHA && len(f) == 3 && f[2] == name {
			return f[0]
		}
	}
	return ""
}
