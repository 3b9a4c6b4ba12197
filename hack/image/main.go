// Command image builds Gatehouse's container images without a container
// engine or a registry: it assembles a root file system from files named
// on its command line (the Go binary, host files such as Debian's haproxy
// with exactly the shared libraries ldd lists, generated /etc/passwd and
// /etc/group) and writes it as a one-layer OCI image in a tar archive that
// `ctr images import` (containerd), `docker load` and `crane push` read,
// named by --ref. With --rootfs it writes the same files into a directory
// instead (the Dockerfile's build stage). See `make image`.
//
// Builds are reproducible: the same inputs and --epoch (default
// $SOURCE_DATE_EPOCH) give the same digest. Files are owned by root with
// modes 0755 (executable) or 0644 and no setuid/setgid bits; the image
// runs as --user.
package main

import (
	"archive/tar"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/gatehouse-dev/gatehouse/hack/internal/atomicfile"
)

// listFlag is a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// options are the parsed command line.
type options struct {
	Ref            string
	Output         string
	OutputPlatform string
	IndexOutput    string
	Rootfs         string
	Listing        string
	SBOM           string
	Files          listFlag // DST=SRC
	Host           listFlag // PATH
	ELF            listFlag // PATH
	Debs           listFlag // PACKAGE:PATH
	CABundle       string
	DebLock        string
	DebCache       string
	Dirs           listFlag // PATH=MODE
	User           string   // NAME:ID
	Entry          listFlag
	Cmd            listFlag
	Env            listFlag
	Labels         listFlag
	Origins        listFlag // PATH=PACKAGE
	WorkDir        string
	Platforms      listFlag
	Epoch          int64
}

func main() {
	var o options
	fs := flag.NewFlagSet("image", flag.ExitOnError)
	fs.StringVar(&o.Ref, "ref", "", "Image reference, with its tag (required with --output or --index-output): ghcr.io/gatehouse-dev/gatehouse:0.1.0.")
	fs.StringVar(&o.Output, "output", "", "Write the image of --output-platform as an OCI image archive (tar) here: the archive ctr images import and docker load read.")
	fs.StringVar(&o.OutputPlatform, "output-platform", "", "The platform --output and --rootfs write (default: the builder's, if among --platform, else the first).")
	fs.StringVar(&o.IndexOutput, "index-output", "", "Write every --platform's image under one OCI image index, as an OCI image layout in a tar archive, here.")
	fs.StringVar(&o.Rootfs, "rootfs", "", "Write the image's files beneath this (new or empty) directory instead of, or as well as, an archive.")
	fs.StringVar(&o.Listing, "listing", "", "Write the listing (reference, digests, files, Go modules, Debian packages) here.")
	fs.StringVar(&o.SBOM, "sbom", "", "Write an SPDX 2.3 JSON software bill of materials (Debian packages, Go modules) here.")
	fs.Var(&o.Files, "file", "DST=SRC: the host file SRC (links followed) at DST in the image; {arch} in SRC is the platform's architecture. Repeatable.")
	fs.Var(&o.Host, "host-path", "PATH: the host file PATH at the same path, with every symbolic link on the way. Repeatable.")
	fs.Var(&o.ELF, "elf", "PATH: as --host-path, plus every shared library and the dynamic loader that ldd lists for it. Repeatable.")
	fs.Var(&o.Debs, "deb", "PACKAGE:PATH: the file PATH of the locked Debian package PACKAGE, with every library it loads from the locked packages. Repeatable.")
	fs.StringVar(&o.CABundle, "ca-bundle", "", "PATH: the CA bundle made of the locked ca-certificates package's certificates, at PATH.")
	fs.StringVar(&o.DebLock, "deb-lock", "", "DIR: the Debian package locks, DIR/<arch>.lock (image lock writes them).")
	fs.StringVar(&o.DebCache, "deb-cache", "", "DIR: keep downloaded, verified .deb files here.")
	fs.Var(&o.Dirs, "dir", "PATH=MODE: an empty directory, mode in octal (/tmp=1777). Repeatable.")
	fs.StringVar(&o.User, "user", "", "NAME:ID: /etc/passwd and /etc/group with root and this user and group, and the image runs as ID:ID.")
	fs.Var(&o.Entry, "entrypoint", "One word of the entrypoint. Repeatable.")
	fs.Var(&o.Cmd, "cmd", "One word of the default arguments. Repeatable.")
	fs.Var(&o.Env, "env", "NAME=VALUE in the image's environment. Repeatable.")
	fs.Var(&o.Labels, "label", "KEY=VALUE image label. Repeatable.")
	fs.Var(&o.Origins, "origin", "PATH=PACKAGE: the Debian package a host file comes from when dpkg does not own it (generated files). Repeatable.")
	fs.StringVar(&o.WorkDir, "workdir", "/", "Working directory.")
	fs.Var(&o.Platforms, "platform", "os/arch[/variant] of an image; repeatable (default the builder's).")
	fs.Int64Var(&o.Epoch, "epoch", envEpoch(), "Every timestamp in the image, in seconds since 1970 (default $SOURCE_DATE_EPOCH, else 0).")
	argv := os.Args[1:]
	lock := len(argv) > 0 && argv[0] == "lock"
	if lock {
		argv = argv[1:]
	}
	args, err := expandArgFiles(argv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(2)
	}
	_ = fs.Parse(args)
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "image: unexpected arguments %q\n", fs.Args())
		os.Exit(2)
	}
	if lock {
		err = runLock(o, os.Stdout)
	} else {
		err = run(o, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func envEpoch() int64 {
	n, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// A platformBuild is one platform's image and what went into it.
type platformBuild struct {
	Platform v1.Platform
	Image    v1.Image
	Rootfs   *rootfs
	Debs     []lockEntry // the locked packages it holds files of
}

func run(o options, out io.Writer) error {
	if o.Output == "" && o.Rootfs == "" && o.IndexOutput == "" {
		return fmt.Errorf("give --output, --index-output, --rootfs or more")
	}
	var ref name.Tag
	if o.Output != "" || o.IndexOutput != "" || o.Ref != "" {
		var err error
		if ref, err = name.NewTag(o.Ref, name.StrictValidation); err != nil {
			return fmt.Errorf("--ref: %w (want registry/repository:tag)", err)
		}
	}
	if len(o.Platforms) == 0 {
		o.Platforms = listFlag{"linux/" + runtime.GOARCH}
	}
	var platforms []v1.Platform
	seen := map[string]bool{}
	for _, s := range o.Platforms {
		p, err := platformOf(s)
		if err != nil {
			return err
		}
		if seen[p.String()] {
			return fmt.Errorf("--platform %s given twice", s)
		}
		seen[p.String()] = true
		platforms = append(platforms, p)
	}
	local, err := outputPlatform(o.OutputPlatform, platforms)
	if err != nil {
		return err
	}
	if o.IndexOutput == "" {
		// Without an index only the one platform's image is written: do
		// not build (or download packages for) the others.
		platforms = []v1.Platform{local}
	}
	created := time.Unix(o.Epoch, 0).UTC()
	var builds []platformBuild
	for _, p := range platforms {
		rfs, cfg, debs, err := assemble(o, p)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		cfg.Platform = p
		b := platformBuild{Platform: p, Rootfs: rfs, Debs: debs}
		if o.Output != "" || o.IndexOutput != "" {
			if b.Image, err = buildImage(rfs, cfg, created); err != nil {
				return err
			}
		}
		builds = append(builds, b)
	}
	var localBuild platformBuild
	for _, b := range builds {
		if b.Platform.Equals(local) {
			localBuild = b
		}
	}

	if o.Rootfs != "" {
		if err := localBuild.Rootfs.writeDir(o.Rootfs, created); err != nil {
			return fmt.Errorf("--rootfs: %w", err)
		}
	}
	if o.Output == "" && o.IndexOutput == "" {
		return nil
	}
	if o.Output != "" {
		if err := atomicfile.Write(o.Output, func(w io.Writer) error { return writeArchive(w, localBuild.Image, ref, created) }); err != nil {
			return fmt.Errorf("--output: %w", err)
		}
		digest, err := localBuild.Image.Digest()
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s %s@%s (%s)\n", o.Output, ref.Name(), digest, local)
	}
	var index v1.ImageIndex
	if o.IndexOutput != "" {
		if index, err = buildIndex(builds); err != nil {
			return err
		}
		if err := atomicfile.Write(o.IndexOutput, func(w io.Writer) error { return writeIndexArchive(w, index, ref, created) }); err != nil {
			return fmt.Errorf("--index-output: %w", err)
		}
		digest, err := index.Digest()
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s %s@%s (index of %d platforms)\n", o.IndexOutput, ref.Name(), digest, len(builds))
	}
	if index == nil {
		builds = []platformBuild{localBuild}
	}
	if o.Listing != "" {
		origins, err := splitPairs(o.Origins, "--origin")
		if err != nil {
			return err
		}
		if err := atomicfile.Write(o.Listing, func(w io.Writer) error {
			return writeListing(w, ref, index, builds, origins)
		}); err != nil {
			return fmt.Errorf("--listing: %w", err)
		}
	}
	if o.SBOM != "" {
		if err := atomicfile.Write(o.SBOM, func(w io.Writer) error {
			return writeSBOM(w, ref, index, builds, created)
		}); err != nil {
			return fmt.Errorf("--sbom: %w", err)
		}
	}
	return nil
}

// outputPlatform is the platform --output and --rootfs write: the one
// asked for, else the builder's when it is built, else the first.
func outputPlatform(want string, platforms []v1.Platform) (v1.Platform, error) {
	if want == "" {
		for _, p := range platforms {
			if p.OS == "linux" && p.Architecture == runtime.GOARCH {
				return p, nil
			}
		}
		return platforms[0], nil
	}
	w, err := platformOf(want)
	if err != nil {
		return v1.Platform{}, err
	}
	for _, p := range platforms {
		if p.Equals(w) {
			return p, nil
		}
	}
	return v1.Platform{}, fmt.Errorf("--output-platform %s is not among --platform %v", want, platforms)
}

// assemble reads every input for one platform into a rootfs and the
// image config, and returns the locked Debian packages it took files of.
func assemble(o options, platform v1.Platform) (*rootfs, imageConfig, []lockEntry, error) {
	rfs := newRootfs()
	cfg := imageConfig{
		Entrypoint: o.Entry,
		Cmd:        o.Cmd,
		Env:        o.Env,
		WorkingDir: o.WorkDir,
	}
	files, err := splitPairs(o.Files, "--file")
	if err != nil {
		return nil, cfg, nil, err
	}
	for _, f := range files {
		src := strings.ReplaceAll(f[1], "{arch}", platform.Architecture)
		data, err := os.ReadFile(src)
		if err != nil {
			return nil, cfg, nil, fmt.Errorf("--file %s: %w", f[0], err)
		}
		info, err := os.Stat(src)
		if err != nil {
			return nil, cfg, nil, err
		}
		if err := rfs.add(entry{Path: f[0], Type: tar.TypeReg, Mode: normalMode(info.Mode()), Data: data, Source: src}); err != nil {
			return nil, cfg, nil, err
		}
	}
	for _, p := range o.Host {
		if err := rfs.addHostPath(p); err != nil {
			return nil, cfg, nil, fmt.Errorf("--host-path: %w", err)
		}
	}
	for _, p := range o.ELF {
		libs, err := sharedLibraries(p)
		if err != nil {
			return nil, cfg, nil, err
		}
		for _, q := range append([]string{p}, libs...) {
			if err := rfs.addHostPath(q); err != nil {
				return nil, cfg, nil, fmt.Errorf("--elf %s: %w", p, err)
			}
		}
	}
	debs, err := addDebs(rfs, o, platform.Architecture)
	if err != nil {
		return nil, cfg, nil, err
	}
	dirs, err := splitPairs(o.Dirs, "--dir")
	if err != nil {
		return nil, cfg, nil, err
	}
	for _, d := range dirs {
		mode, err := strconv.ParseInt(d[1], 8, 64)
		if err != nil {
			return nil, cfg, nil, fmt.Errorf("--dir %s: mode %q is not octal", d[0], d[1])
		}
		if err := rfs.add(entry{Path: d[0], Type: tar.TypeDir, Mode: mode}); err != nil {
			return nil, cfg, nil, err
		}
	}
	if o.User != "" {
		user, id, ok := strings.Cut(o.User, ":")
		n, err := strconv.Atoi(id)
		if !ok || err != nil || n <= 0 || !validUserName.MatchString(user) {
			return nil, cfg, nil, fmt.Errorf("--user %q: want NAME:ID with a non-zero numeric ID", o.User)
		}
		passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:/nonexistent:/sbin/nologin\n", user, n, n, user)
		group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", user, n)
		for _, f := range []entry{
			{Path: "/etc/passwd", Type: tar.TypeReg, Mode: 0o644, Data: []byte(passwd)},
			{Path: "/etc/group", Type: tar.TypeReg, Mode: 0o644, Data: []byte(group)},
		} {
			if err := rfs.add(f); err != nil {
				return nil, cfg, nil, err
			}
		}
		cfg.User = fmt.Sprintf("%d:%d", n, n)
	}
	labels, err := splitPairs(o.Labels, "--label")
	if err != nil {
		return nil, cfg, nil, err
	}
	if len(labels) > 0 {
		cfg.Labels = map[string]string{}
		for _, l := range labels {
			cfg.Labels[l[0]] = l[1]
		}
	}
	for _, e := range o.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			return nil, cfg, nil, fmt.Errorf("--env %q: want NAME=VALUE", e)
		}
	}
	if len(o.Entry) > 0 {
		if e, ok := rfs.entries[path.Clean(o.Entry[0])]; !ok || e.Type != tar.TypeReg || e.Mode&0o111 == 0 {
			return nil, cfg, nil, fmt.Errorf("--entrypoint %s: no executable file at that path in the image", o.Entry[0])
		}
	}
	return rfs, cfg, debs, nil
}

// addDebs adds the --deb files and the --ca-bundle from the locked
// packages of arch, each file with every library it loads, and each
// used package's copyright file (the licences travel with the binaries).
// A locked package that supplies nothing is an error: the lock is stale.
func addDebs(rfs *rootfs, o options, arch string) ([]lockEntry, error) {
	roots, err := parseDebRoots(o.Debs)
	if err != nil {
		return nil, err
	}
	if len(roots) == 0 && o.CABundle == "" {
		return nil, nil
	}
	if o.DebLock == "" || o.DebCache == "" {
		return nil, fmt.Errorf("--deb and --ca-bundle need --deb-lock and --deb-cache")
	}
	lock, err := readLock(lockPath(o.DebLock, arch))
	if err != nil {
		return nil, err
	}
	cache := debCache{Dir: o.DebCache}
	var pkgs []*debPackage
	byName := map[string]*debPackage{}
	for _, e := range lock {
		if e.Arch != arch && e.Arch != "all" {
			return nil, fmt.Errorf("%s: %s is for %s", lockPath(o.DebLock, arch), e.Package, e.Arch)
		}
		p, err := cache.fetch(e)
		if err != nil {
			return nil, err
		}
		pkgs = append(pkgs, p)
		byName[e.Package] = p
	}
	u, err := newUniverse(pkgs)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, r := range roots {
		_, file, err := u.resolve(r.Path)
		if err != nil {
			return nil, fmt.Errorf("--deb %s:%s: %w", r.Package, r.Path, err)
		}
		if got := u.owner[file].Lock.Package; got != r.Package {
			return nil, fmt.Errorf("--deb %s:%s: the file comes from %s", r.Package, r.Path, got)
		}
		paths = append(paths, r.Path)
	}
	needed, err := u.closure(paths, arch)
	if err != nil {
		return nil, err
	}
	used := map[string]bool{}
	for _, p := range needed {
		f, owner := u.files[p], u.owner[p]
		used[owner.Lock.Package] = true
		e := entry{Path: p, Type: f.Type, Deb: &owner.Lock, Source: "deb:" + owner.Lock.Package}
		switch f.Type {
		case tar.TypeSymlink:
			e.Mode, e.Target = 0o777, f.Target
		default:
			e.Mode, e.Data = normalMode(fs.FileMode(f.Mode)), f.Data
		}
		if err := rfs.add(e); err != nil {
			return nil, err
		}
	}
	if o.CABundle != "" {
		p, ok := byName[caPackage]
		if !ok {
			return nil, fmt.Errorf("--ca-bundle: %s is not locked", caPackage)
		}
		bundle, err := caBundle(p)
		if err != nil {
			return nil, err
		}
		if err := rfs.add(entry{Path: o.CABundle, Type: tar.TypeReg, Mode: 0o644, Data: bundle, Deb: &p.Lock, Source: "deb:" + caPackage}); err != nil {
			return nil, err
		}
		used[caPackage] = true
	}
	var out []lockEntry
	for _, p := range pkgs {
		if !used[p.Lock.Package] {
			return nil, fmt.Errorf("%s: %s supplies no file the image needs: run make image-lock", lockPath(o.DebLock, arch), p.Lock.Package)
		}
		out = append(out, p.Lock)
		// The copyright file, where the package has its own (some link
		// their documentation directory to another package's).
		cp := "/usr/share/doc/" + p.Lock.Package + "/copyright"
		if f, ok := p.Files[cp]; ok && f.Type == tar.TypeReg {
			if err := rfs.add(entry{Path: cp, Type: tar.TypeReg, Mode: 0o644, Data: f.Data, Deb: &p.Lock, Source: "deb:" + p.Lock.Package}); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

var validUserName = regexp.MustCompile(`^[a-z_][a-z0-9_-]*$`)

// splitPairs splits each "A=B".
func splitPairs(list []string, flagName string) ([][2]string, error) {
	var pairs [][2]string
	for _, s := range list {
		a, b, ok := strings.Cut(s, "=")
		if !ok || a == "" {
			return nil, fmt.Errorf("%s %q: want A=B", flagName, s)
		}
		pairs = append(pairs, [2]string{a, b})
	}
	return pairs, nil
}

// lddLine matches the lines of ldd's output that name a file: "libc.so.6
// => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" and the loader's
// "/lib64/ld-linux-x86-64.so.2 (0x...)". The vDSO has no file.
var lddLine = regexp.MustCompile(`^\s*(?:\S+\s+=>\s+)?(/\S+)\s+\(0x[0-9a-f]+\)\s*$`)

// sharedLibraries runs ldd on the host's program p: the libraries it
// links, transitively, and the dynamic loader, as the host's loader
// resolves them (so exactly what the program loads at start).
func sharedLibraries(p string) ([]string, error) {
	out, err := exec.Command("ldd", p).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("--elf %s: ldd: %v: %s", p, err, strings.TrimSpace(string(out)))
	}
	var libs []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "not found") {
			return nil, fmt.Errorf("--elf %s: ldd: %s", p, strings.TrimSpace(line))
		}
		if m := lddLine.FindStringSubmatch(line); m != nil {
			libs = append(libs, m[1])
		}
	}
	if len(libs) == 0 {
		return nil, fmt.Errorf("--elf %s: ldd lists no library: use --host-path for a static program", p)
	}
	return libs, nil
}

// expandArgFiles replaces each argument "@PATH" with the arguments in
// the file PATH, one a line ("#" starts a comment line): the image's
// layout is kept in one file (hack/image/gatehouse.args) that the
// Makefile and the Dockerfile both pass, so both build the same files.
func expandArgFiles(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		file, ok := strings.CutPrefix(a, "@")
		if !ok {
			out = append(out, a)
			continue
		}
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(string(data), "\n") {
			line = strings.TrimSpace(line)
			if line != "" && !strings.HasPrefix(line, "#") {
				out = append(out, line)
			}
		}
	}
	return out, nil
}
