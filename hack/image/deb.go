package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/ulikunitz/xz"
)

// A debFile is one file, link or directory of a Debian package's data.
type debFile struct {
	Path   string // absolute and clean: "/usr/sbin/haproxy"
	Type   byte   // tar.TypeReg, tar.TypeSymlink or tar.TypeDir
	Mode   int64
	Data   []byte
	Target string // a link's target, as in the package
}

// A debPackage is a downloaded, verified and unpacked .deb.
type debPackage struct {
	Lock  lockEntry
	Files map[string]debFile
}

// Limits on what one .deb may unpack to: the packages are verified
// against the lock's sha256 before they are read, but a lock regenerated
// from a compromised index must still not exhaust the builder.
const (
	maxDebMember = 256 << 20
	maxDebData   = 512 << 20
)

// readDeb unpacks a .deb: an ar archive ("!<arch>\n") whose members are
// debian-binary, control.tar.* and data.tar.* (deb(5)). Only data.tar is
// read, compressed with xz (what bookworm's packages use), gzip or none.
func readDeb(deb []byte) (map[string]debFile, error) {
	const magic = "!<arch>\n"
	if !bytes.HasPrefix(deb, []byte(magic)) {
		return nil, errors.New("not an ar archive")
	}
	r := deb[len(magic):]
	for len(r) > 0 {
		if len(r) < 60 {
			return nil, errors.New("truncated ar header")
		}
		hdr := r[:60]
		if string(hdr[58:60]) != "`\n" {
			return nil, errors.New("bad ar header")
		}
		name := strings.TrimRight(strings.TrimSpace(string(hdr[0:16])), "/")
		size, err := strconv.ParseInt(strings.TrimSpace(string(hdr[48:58])), 10, 64)
		if err != nil || size < 0 || size > maxDebMember || size > int64(len(r)-60) {
			return nil, fmt.Errorf("ar member %q: bad size", name)
		}
		body := r[60 : 60+size]
		// Members are padded to an even offset.
		r = r[60+size:]
		if size%2 == 1 && len(r) > 0 {
			r = r[1:]
		}
		var rd io.Reader
		switch name {
		case "data.tar.xz":
			xr, err := xz.NewReader(bytes.NewReader(body))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			rd = xr
		case "data.tar.gz":
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			rd = zr
		case "data.tar":
			rd = bytes.NewReader(body)
		default:
			if strings.HasPrefix(name, "data.tar") {
				return nil, fmt.Errorf("%s: compression not supported", name)
			}
			continue
		}
		return readDataTar(io.LimitReader(rd, maxDebData))
	}
	return nil, errors.New("no data.tar member")
}

// readDataTar reads a package's file tree. Hard links become copies of
// their target; anything but files, links and directories is refused.
func readDataTar(r io.Reader) (map[string]debFile, error) {
	files := map[string]debFile{}
	tr := tar.NewReader(r)
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		p := path.Clean("/" + h.Name)
		f := debFile{Path: p, Mode: h.Mode & 0o7777}
		switch h.Typeflag {
		case tar.TypeReg:
			total += h.Size
			if total > maxDebData {
				return nil, errors.New("data.tar too large")
			}
			f.Type = tar.TypeReg
			if f.Data, err = io.ReadAll(tr); err != nil {
				return nil, err
			}
		case tar.TypeSymlink:
			f.Type, f.Target = tar.TypeSymlink, h.Linkname
		case tar.TypeDir:
			f.Type = tar.TypeDir
		case tar.TypeLink:
			target, ok := files[path.Clean("/"+h.Linkname)]
			if !ok || target.Type != tar.TypeReg {
				return nil, fmt.Errorf("%s: hard link to %s, not an earlier file", p, h.Linkname)
			}
			f.Type, f.Data = tar.TypeReg, target.Data
		default:
			return nil, fmt.Errorf("%s: unsupported entry type %q", p, h.Typeflag)
		}
		files[p] = f
	}
}

// A stanza is one paragraph of a Debian Packages index.
type stanza map[string]string

// parsePackages reads a Packages index (deb822: "Key: value" lines,
// continuation lines starting with a space, paragraphs separated by
// blank lines). Only the fields the lock needs are kept.
func parsePackages(r io.Reader) ([]stanza, error) {
	keep := map[string]bool{"Package": true, "Version": true, "Architecture": true, "Filename": true,
		"SHA256": true, "Depends": true, "Pre-Depends": true, "Size": true, "Source": true}
	var out []stanza
	cur := stanza{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if len(cur) > 0 {
				out = append(out, cur)
				cur = stanza{}
			}
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			continue // a continuation of a field not kept (Description)
		}
		k, v, ok := strings.Cut(line, ":")
		if ok && keep[k] {
			cur[k] = strings.TrimSpace(v)
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out, sc.Err()
}

// dependsNames are the packages a Depends (or Pre-Depends) field names:
// the first alternative of each "a (>= 1) | b", without version or
// architecture qualifiers.
func dependsNames(field string) []string {
	var names []string
	for _, dep := range strings.Split(field, ",") {
		alt, _, _ := strings.Cut(dep, "|")
		alt = strings.TrimSpace(alt)
		if i := strings.IndexAny(alt, " (["); i >= 0 {
			alt = alt[:i]
		}
		alt, _, _ = strings.Cut(alt, ":")
		if alt != "" {
			names = append(names, alt)
		}
	}
	return names
}

// compareVersions orders Debian versions as dpkg does
// ([epoch:]upstream[-revision], deb-version(7)): <0, 0 or >0.
func compareVersions(a, b string) int {
	ea, ua, ra := splitVersion(a)
	eb, ub, rb := splitVersion(b)
	if ea != eb {
		if ea < eb {
			return -1
		}
		return 1
	}
	if c := compareFragment(ua, ub); c != 0 {
		return c
	}
	return compareFragment(ra, rb)
}

func splitVersion(v string) (epoch int, upstream, revision string) {
	if e, rest, ok := strings.Cut(v, ":"); ok {
		epoch, _ = strconv.Atoi(e)
		v = rest
	}
	if i := strings.LastIndex(v, "-"); i >= 0 {
		return epoch, v[:i], v[i+1:]
	}
	return epoch, v, ""
}

// compareFragment is dpkg's verrevcmp: alternating runs of non-digits
// (compared by order(), in which '~' sorts before everything, even the
// end) and digits (compared as numbers).
func compareFragment(a, b string) int {
	order := func(s string, i int) int {
		if i >= len(s) {
			return 0
		}
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			return 0
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			return int(c)
		case c == '~':
			return -1
		default:
			return int(c) + 256
		}
	}
	isDigit := func(s string, i int) bool { return i < len(s) && s[i] >= '0' && s[i] <= '9' }
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		for (i < len(a) && !isDigit(a, i)) || (j < len(b) && !isDigit(b, j)) {
			if oa, ob := order(a, i), order(b, j); oa != ob {
				return oa - ob
			}
			i++
			j++
		}
		for i < len(a) && a[i] == '0' {
			i++
		}
		for j < len(b) && b[j] == '0' {
			j++
		}
		first := 0
		for isDigit(a, i) && isDigit(b, j) {
			if first == 0 {
				first = int(a[i]) - int(b[j])
			}
			i++
			j++
		}
		if isDigit(a, i) {
			return 1
		}
		if isDigit(b, j) {
			return -1
		}
		if first != 0 {
			return first
		}
	}
	return 0
}
