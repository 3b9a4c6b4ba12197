package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// An entry is one file, directory or symbolic link of the image's root
// file system. Everything that would make two builds differ is fixed
// here: owner root (the non-root user the image runs as can change
// nothing of it), modes without setuid/setgid, and one timestamp for all.
type entry struct {
	// Path is absolute and clean, as in the image ("/usr/sbin/haproxy").
	Path string
	Type byte // tar.TypeReg, tar.TypeDir or tar.TypeSymlink
	Mode int64
	// Data is a regular file's content; Source the host file it came
	// from ("" for a file the builder wrote, such as /etc/passwd).
	Data   []byte
	Source string
	// Target is a symbolic link's target, as on the host.
	Target string
	// Deb is the locked Debian package the entry comes from, if any.
	Deb *lockEntry
}

func (e entry) sha256() string {
	sum := sha256.Sum256(e.Data)
	return hex.EncodeToString(sum[:])
}

// rootfs is the set of entries, by path. Directories above every entry
// are added when the layer is written.
type rootfs struct {
	entries map[string]entry
}

func newRootfs() *rootfs { return &rootfs{entries: map[string]entry{}} }

// add records e, refusing two different entries at one path: two sources
// meeting in the image is a mistake in the Makefile, not something to
// settle silently.
func (r *rootfs) add(e entry) error {
	e.Path = path.Clean("/" + e.Path)
	if e.Mode&^0o1777 != 0 {
		return fmt.Errorf("%s: mode %#o: only permission bits and the sticky bit (no setuid or setgid)", e.Path, e.Mode)
	}
	if old, ok := r.entries[e.Path]; ok {
		if old.Type == e.Type && old.Mode == e.Mode && old.Target == e.Target && bytes.Equal(old.Data, e.Data) {
			return nil
		}
		return fmt.Errorf("%s: added twice with different contents", e.Path)
	}
	r.entries[e.Path] = e
	return nil
}

// normalMode is the mode a copied file gets: 0755 if the host's file is
// executable by anyone, else 0644. The host's other bits (setuid, group
// write, a umask) never reach the image.
func normalMode(m fs.FileMode) int64 {
	if m&0o111 != 0 {
		return 0o755
	}
	return 0o644
}

// addHostPath copies the host's file at p into the image at the same
// path, with every symbolic link met on the way: /lib64 -> usr/lib64 on a
// merged-/usr Debian, then /usr/lib64/ld-linux-x86-64.so.2 ->
// ../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2, and so on. The links are
// kept as links so that every path a program or ldd names resolves in the
// image as on the host.
func (r *rootfs) addHostPath(p string) error {
	return r.addHostPathDepth(p, 0)
}

func (r *rootfs) addHostPathDepth(p string, depth int) error {
	if depth > 40 {
		return fmt.Errorf("%s: too many levels of symbolic links", p)
	}
	if !filepath.IsAbs(p) {
		return fmt.Errorf("%s: want an absolute path", p)
	}
	p = filepath.Clean(p)
	// Walk the components: the first that is a link is added as a link,
	// and the rest of the path is resolved from its target.
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i := range parts {
		prefix := "/" + strings.Join(parts[:i+1], "/")
		info, err := os.Lstat(prefix)
		if err != nil {
			return err
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(prefix)
			if err != nil {
				return err
			}
			if err := r.add(entry{Path: prefix, Type: tar.TypeSymlink, Mode: 0o777, Target: target, Source: prefix}); err != nil {
				return err
			}
			resolved := target
			if !filepath.IsAbs(target) {
				resolved = filepath.Join(filepath.Dir(prefix), target)
			}
			rest := strings.Join(parts[i+1:], "/")
			return r.addHostPathDepth(filepath.Join(resolved, rest), depth+1)
		}
		if i < len(parts)-1 {
			if !info.IsDir() {
				return fmt.Errorf("%s: not a directory", prefix)
			}
			continue
		}
		if !info.Mode().IsRegular() {
			return fmt.Errorf("%s: not a regular file (%s)", p, info.Mode().Type())
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return r.add(entry{Path: p, Type: tar.TypeReg, Mode: normalMode(info.Mode()), Data: data, Source: p})
	}
	return nil
}

// sorted returns every entry with the directories above them, by path.
func (r *rootfs) sorted() []entry {
	all := map[string]entry{}
	for p, e := range r.entries {
		all[p] = e
		for dir := path.Dir(p); dir != "/"; dir = path.Dir(dir) {
			if _, ok := r.entries[dir]; !ok {
				all[dir] = entry{Path: dir, Type: tar.TypeDir, Mode: 0o755}
			}
		}
	}
	list := make([]entry, 0, len(all))
	for _, e := range all {
		list = append(list, e)
	}
	slices.SortFunc(list, func(a, b entry) int { return strings.Compare(a.tarName(), b.tarName()) })
	return list
}

// tarName is the entry's name in the layer: relative, a directory's with
// a trailing slash. The layer is sorted by it, so that a directory comes
// before what it holds.
func (e entry) tarName() string {
	name := strings.TrimPrefix(e.Path, "/")
	if e.Type == tar.TypeDir {
		name += "/"
	}
	return name
}

// writeTar writes the layer: entries in path order, owned by root, every
// time set to modTime, no user or group names, no extended attributes.
func (r *rootfs) writeTar(w io.Writer, modTime time.Time) error {
	tw := tar.NewWriter(w)
	for _, e := range r.sorted() {
		hdr := &tar.Header{
			Typeflag: e.Type,
			Name:     e.tarName(),
			Mode:     e.Mode,
			ModTime:  modTime,
			Format:   tar.FormatPAX,
		}
		switch e.Type {
		case tar.TypeSymlink:
			hdr.Linkname = e.Target
		case tar.TypeReg:
			hdr.Size = int64(len(e.Data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if e.Type == tar.TypeReg {
			if _, err := tw.Write(e.Data); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

// writeDir writes the entries beneath dir, for a Dockerfile's
// `COPY --from=build <dir>/ /`: the same files, links and modes as the
// layer. dir must not exist yet or be empty.
func (r *rootfs) writeDir(dir string, modTime time.Time) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if names, err := os.ReadDir(dir); err != nil {
		return err
	} else if len(names) > 0 {
		return fmt.Errorf("%s is not empty", dir)
	}
	list := r.sorted()
	for _, e := range list {
		p := filepath.Join(dir, filepath.FromSlash(e.Path))
		var err error
		switch e.Type {
		case tar.TypeDir:
			err = os.Mkdir(p, 0o700)
		case tar.TypeSymlink:
			err = os.Symlink(e.Target, p)
		case tar.TypeReg:
			err = os.WriteFile(p, e.Data, 0o600)
		}
		if err != nil {
			return err
		}
	}
	// Modes and times last, deepest first, so that a directory without
	// write permission is not needed for writing.
	for _, e := range slices.Backward(list) {
		p := filepath.Join(dir, filepath.FromSlash(e.Path))
		if e.Type == tar.TypeSymlink {
			continue
		}
		if err := os.Chmod(p, fs.FileMode(e.Mode&0o777)|stickyMode(e.Mode)); err != nil {
			return err
		}
		if err := os.Chtimes(p, modTime, modTime); err != nil {
			return err
		}
	}
	return nil
}

func stickyMode(m int64) fs.FileMode {
	if m&0o1000 != 0 {
		return fs.ModeSticky
	}
	return 0
}
