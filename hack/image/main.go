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
	"os"
	"os/exec"
	"path"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
)

// listFlag is a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// options are the parsed command line.
type options struct {
	Ref      string
	Output   string
	Rootfs   string
	Listing  string
	Files    listFlag // DST=SRC
	Host     listFlag // PATH
	ELF      listFlag // PATH
	Dirs     listFlag // PATH=MODE
	User     string   // NAME:ID
	Entry    listFlag
	Cmd      listFlag
	Env      listFlag
	Labels   listFlag
	Origins  listFlag // PATH=PACKAGE
	WorkDir  string
	Platform string
	Epoch    int64
}

func main() {
	var o options
	fs := flag.NewFlagSet("image", flag.ExitOnError)
	fs.StringVar(&o.Ref, "ref", "", "Image reference, with its tag (required with --output): ghcr.io/gatehouse-dev/gatehouse:0.1.0.")
	fs.StringVar(&o.Output, "output", "", "Write the OCI image archive (tar) here.")
	fs.StringVar(&o.Rootfs, "rootfs", "", "Write the image's files beneath this (new or empty) directory instead of, or as well as, an archive.")
	fs.StringVar(&o.Listing, "listing", "", "Write the listing (reference, digest, files, Go modules, Debian packages) here.")
	fs.Var(&o.Files, "file", "DST=SRC: the host file SRC (links followed) at DST in the image. Repeatable.")
	fs.Var(&o.Host, "host-path", "PATH: the host file PATH at the same path, with every symbolic link on the way. Repeatable.")
	fs.Var(&o.ELF, "elf", "PATH: as --host-path, plus every shared library and the dynamic loader that ldd lists for it. Repeatable.")
	fs.Var(&o.Dirs, "dir", "PATH=MODE: an empty directory, mode in octal (/tmp=1777). Repeatable.")
	fs.StringVar(&o.User, "user", "", "NAME:ID: /etc/passwd and /etc/group with root and this user and group, and the image runs as ID:ID.")
	fs.Var(&o.Entry, "entrypoint", "One word of the entrypoint. Repeatable.")
	fs.Var(&o.Cmd, "cmd", "One word of the default arguments. Repeatable.")
	fs.Var(&o.Env, "env", "NAME=VALUE in the image's environment. Repeatable.")
	fs.Var(&o.Labels, "label", "KEY=VALUE image label. Repeatable.")
	fs.Var(&o.Origins, "origin", "PATH=PACKAGE: the Debian package a file comes from when dpkg does not own it (generated files). Repeatable.")
	fs.StringVar(&o.WorkDir, "workdir", "/", "Working directory.")
	fs.StringVar(&o.Platform, "platform", "linux/"+runtime.GOARCH, "os/arch[/variant] of the image.")
	fs.Int64Var(&o.Epoch, "epoch", envEpoch(), "Every timestamp in the image, in seconds since 1970 (default $SOURCE_DATE_EPOCH, else 0).")
	args, err := expandArgFiles(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(2)
	}
	_ = fs.Parse(args)
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "image: unexpected arguments %q\n", fs.Args())
		os.Exit(2)
	}
	if err := run(o, os.Stdout); err != nil {
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

func run(o options, out io.Writer) error {
	if o.Output == "" && o.Rootfs == "" {
		return fmt.Errorf("give --output, --rootfs or both")
	}
	var ref name.Tag
	if o.Output != "" || o.Ref != "" {
		var err error
		if ref, err = name.NewTag(o.Ref, name.StrictValidation); err != nil {
			return fmt.Errorf("--ref: %w (want registry/repository:tag)", err)
		}
	}
	platform, err := platformOf(o.Platform)
	if err != nil {
		return err
	}
	created := time.Unix(o.Epoch, 0).UTC()
	rfs, cfg, err := assemble(o)
	if err != nil {
		return err
	}
	cfg.Platform = platform

	if o.Rootfs != "" {
		if err := rfs.writeDir(o.Rootfs, created); err != nil {
			return fmt.Errorf("--rootfs: %w", err)
		}
	}
	if o.Output == "" {
		return nil
	}
	img, err := buildImage(rfs, cfg, created)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(o.Output, func(w io.Writer) error { return writeArchive(w, img, ref, created) }); err != nil {
		return fmt.Errorf("--output: %w", err)
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	if o.Listing != "" {
		origins, err := splitPairs(o.Origins, "--origin")
		if err != nil {
			return err
		}
		if err := writeFileAtomic(o.Listing, func(w io.Writer) error {
			return writeListing(w, ref, img, rfs, origins)
		}); err != nil {
			return fmt.Errorf("--listing: %w", err)
		}
	}
	fmt.Fprintf(out, "%s %s@%s\n", o.Output, ref.Name(), digest)
	return nil
}

// assemble reads every input into a rootfs and the image config.
func assemble(o options) (*rootfs, imageConfig, error) {
	rfs := newRootfs()
	cfg := imageConfig{
		Entrypoint: o.Entry,
		Cmd:        o.Cmd,
		Env:        o.Env,
		WorkingDir: o.WorkDir,
	}
	files, err := splitPairs(o.Files, "--file")
	if err != nil {
		return nil, cfg, err
	}
	for _, f := range files {
		data, err := os.ReadFile(f[1])
		if err != nil {
			return nil, cfg, fmt.Errorf("--file %s: %w", f[0], err)
		}
		info, err := os.Stat(f[1])
		if err != nil {
			return nil, cfg, err
		}
		if err := rfs.add(entry{Path: f[0], Type: tar.TypeReg, Mode: normalMode(info.Mode()), Data: data, Source: f[1]}); err != nil {
			return nil, cfg, err
		}
	}
	for _, p := range o.Host {
		if err := rfs.addHostPath(p); err != nil {
			return nil, cfg, fmt.Errorf("--host-path: %w", err)
		}
	}
	for _, p := range o.ELF {
		libs, err := sharedLibraries(p)
		if err != nil {
			return nil, cfg, err
		}
		for _, q := range append([]string{p}, libs...) {
			if err := rfs.addHostPath(q); err != nil {
				return nil, cfg, fmt.Errorf("--elf %s: %w", p, err)
			}
		}
	}
	dirs, err := splitPairs(o.Dirs, "--dir")
	if err != nil {
		return nil, cfg, err
	}
	for _, d := range dirs {
		mode, err := strconv.ParseInt(d[1], 8, 64)
		if err != nil {
			return nil, cfg, fmt.Errorf("--dir %s: mode %q is not octal", d[0], d[1])
		}
		if err := rfs.add(entry{Path: d[0], Type: tar.TypeDir, Mode: mode}); err != nil {
			return nil, cfg, err
		}
	}
	if o.User != "" {
		user, id, ok := strings.Cut(o.User, ":")
		n, err := strconv.Atoi(id)
		if !ok || err != nil || n <= 0 || !validUserName.MatchString(user) {
			return nil, cfg, fmt.Errorf("--user %q: want NAME:ID with a non-zero numeric ID", o.User)
		}
		passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:/nonexistent:/sbin/nologin\n", user, n, n, user)
		group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", user, n)
		for _, f := range []entry{
			{Path: "/etc/passwd", Type: tar.TypeReg, Mode: 0o644, Data: []byte(passwd)},
			{Path: "/etc/group", Type: tar.TypeReg, Mode: 0o644, Data: []byte(group)},
		} {
			if err := rfs.add(f); err != nil {
				return nil, cfg, err
			}
		}
		cfg.User = fmt.Sprintf("%d:%d", n, n)
	}
	labels, err := splitPairs(o.Labels, "--label")
	if err != nil {
		return nil, cfg, err
	}
	if len(labels) > 0 {
		cfg.Labels = map[string]string{}
		for _, l := range labels {
			cfg.Labels[l[0]] = l[1]
		}
	}
	for _, e := range o.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			return nil, cfg, fmt.Errorf("--env %q: want NAME=VALUE", e)
		}
	}
	if len(o.Entry) > 0 {
		if e, ok := rfs.entries[path.Clean(o.Entry[0])]; !ok || e.Type != tar.TypeReg || e.Mode&0o111 == 0 {
			return nil, cfg, fmt.Errorf("--entrypoint %s: no executable file at that path in the image", o.Entry[0])
		}
	}
	return rfs, cfg, nil
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
