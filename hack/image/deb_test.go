package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCompareVersions(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"2.6.12-1+deb12u4", "2.6.12-1+deb12u3", 1},
		{"2.6.12-1+deb12u10", "2.6.12-1+deb12u9", 1},
		{"3.0.22-1~deb12u2", "3.0.22-1", -1}, // ~ sorts before the end
		{"1:4.4.33-2", "4.4.34-1", 1},        // the epoch wins
		{"1.0", "1.0-0", 0},
		{"1.0a", "1.0", 1},
		{"1.0.1", "1.0a", 1}, // a letter sorts before any other non-digit
		{"252.39-1~deb12u2", "252.39-1~deb12u1", 1},
		{"20250419~deb12u2", "20230311+deb12u1", 1},
		{"1.2.3", "1.2.3", 0},
	} {
		got := compareVersions(c.a, c.b)
		if (got > 0) != (c.want > 0) || (got < 0) != (c.want < 0) {
			t.Errorf("compareVersions(%q, %q) = %d, want sign of %d", c.a, c.b, got, c.want)
		}
		back := compareVersions(c.b, c.a)
		if (back > 0) != (c.want < 0) || (back < 0) != (c.want > 0) {
			t.Errorf("compareVersions(%q, %q) = %d: not the reverse of the other order", c.b, c.a, back)
		}
	}
}

func TestDependsNames(t *testing.T) {
	got := dependsNames("libc6 (>= 2.34), libcrypt1 (>= 1:4.1.0), default-mta | mail-transport-agent, libfoo:any, bar [amd64]")
	if want := "libc6 libcrypt1 default-mta libfoo bar"; strings.Join(got, " ") != want {
		t.Errorf("dependsNames = %q, want %q", got, want)
	}
}

// fakeDeb builds a .deb (an ar archive with a gzip data.tar) holding the
// given files ("path" => content; "path" => "->target" is a link).
func fakeDeb(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var data bytes.Buffer
	zw := gzip.NewWriter(&data)
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "./", Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	for p, c := range files {
		h := &tar.Header{Name: "." + p, Mode: 0o644}
		if target, ok := strings.CutPrefix(c, "->"); ok {
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, target, 0o777
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(c))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(c)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	var deb bytes.Buffer
	deb.WriteString("!<arch>\n")
	member := func(name string, body []byte) {
		fmt.Fprintf(&deb, "%-16s%-12s%-6s%-6s%-8s%-10d`\n", name, "0", "0", "0", "100644", len(body))
		deb.Write(body)
		if len(body)%2 == 1 {
			deb.WriteByte('\n')
		}
	}
	member("debian-binary", []byte("2.0\n"))
	member("control.tar.gz", []byte("x")) // odd size: the padding is skipped
	member("data.tar.gz", data.Bytes())
	return deb.Bytes()
}

func TestReadDeb(t *testing.T) {
	files, err := readDeb(fakeDeb(t, map[string]string{
		"/usr/lib/x/libx.so.1.0": "library",
		"/usr/lib/x/libx.so.1":   "->libx.so.1.0",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if f := files["/usr/lib/x/libx.so.1.0"]; f.Type != tar.TypeReg || string(f.Data) != "library" {
		t.Errorf("file %+v", f)
	}
	if f := files["/usr/lib/x/libx.so.1"]; f.Type != tar.TypeSymlink || f.Target != "libx.so.1.0" {
		t.Errorf("link %+v", f)
	}
	for name, deb := range map[string][]byte{
		"not ar":    []byte("PK\x03\x04"),
		"truncated": fakeDeb(t, map[string]string{"/a": "b"})[:70],
		"no data":   []byte("!<arch>\n"),
	} {
		if _, err := readDeb(deb); err == nil {
			t.Errorf("%s: read", name)
		}
	}
}

// TestFetchRefusesATamperedPackage: a mirror (or anyone on the plain-HTTP
// path to it) that serves other bytes than the lock pins gets nothing into
// the image, and a tampered file in the cache is not trusted either.
func TestFetchRefusesATamperedPackage(t *testing.T) {
	good := fakeDeb(t, map[string]string{"/usr/sbin/haproxy": "the real one"})
	evil := fakeDeb(t, map[string]string{"/usr/sbin/haproxy": "a backdoor"})
	var served []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/debian/pool/main/h/haproxy/haproxy_1+deb12u1_amd64.deb" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(served)
	}))
	defer srv.Close()
	t.Setenv("DEBIAN_MIRROR", srv.URL)
	e := lockEntry{Package: "haproxy", Version: "1+deb12u1", Arch: "amd64", SHA256: sha256Hex(good),
		Path: "debian/pool/main/h/haproxy/haproxy_1+deb12u1_amd64.deb"}
	cache := debCache{Dir: t.TempDir()}

	served = evil
	if _, err := cache.fetch(e); err == nil || !strings.Contains(err.Error(), "sha256") {
		t.Fatalf("a tampered download: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cache.Dir, "haproxy_1+deb12u1_amd64.deb")); err == nil {
		t.Fatal("the tampered download was cached")
	}

	served = good
	p, err := cache.fetch(e)
	if err != nil {
		t.Fatal(err)
	}
	if string(p.Files["/usr/sbin/haproxy"].Data) != "the real one" {
		t.Fatalf("files %v", p.Files)
	}
	// Tampered in the cache: downloaded again, and the good bytes win.
	if err := os.WriteFile(filepath.Join(cache.Dir, "haproxy_1+deb12u1_amd64.deb"), evil, 0o644); err != nil {
		t.Fatal(err)
	}
	if p, err = cache.fetch(e); err != nil || string(p.Files["/usr/sbin/haproxy"].Data) != "the real one" {
		t.Fatalf("after tampering with the cache: %v %v", err, p)
	}
}

func TestReadLockRefusals(t *testing.T) {
	sum := strings.Repeat("a", 64)
	for name, line := range map[string]string{
		"short sha":     "haproxy 1 amd64 abc debian/pool/h.deb",
		"absolute path": "haproxy 1 amd64 " + sum + " /etc/passwd",
		"dot dot":       "haproxy 1 amd64 " + sum + " debian/../../h.deb",
		"fields":        "haproxy 1 amd64 " + sum,
	} {
		f := filepath.Join(t.TempDir(), "amd64.lock")
		if err := os.WriteFile(f, []byte("# c\n"+line+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := readLock(f); err == nil {
			t.Errorf("%s: read", name)
		}
	}
}

// TestReleaseSHA256OnlySigned: a checksum after the signature's start
// (outside what gpgv verified) is not taken.
func TestReleaseSHA256OnlySigned(t *testing.T) {
	good, evil := strings.Repeat("1", 64), strings.Repeat("2", 64)
	release := "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\nOrigin: Debian\nMD5Sum:\n " + evil + " 10 main/binary-amd64/Packages.xz\nSHA256:\n " +
		good + " 10 main/binary-amd64/Packages.xz\n-----BEGIN PGP SIGNATURE-----\nSHA256:\n " + evil + " 10 main/binary-arm64/Packages.xz\n"
	if got := releaseSHA256([]byte(release), "main/binary-amd64/Packages.xz"); got != good {
		t.Errorf("amd64: %q", got)
	}
	if got := releaseSHA256([]byte(release), "main/binary-arm64/Packages.xz"); got != "" {
		t.Errorf("arm64 (unsigned): %q", got)
	}
}

func TestParsePackages(t *testing.T) {
	st, err := parsePackages(strings.NewReader("Package: a\nVersion: 1\nDescription: x\n more\nDepends: b\n\nPackage: b\nVersion: 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 2 || st[0]["Depends"] != "b" || st[1]["Version"] != "2" || st[0]["Description"] != "" {
		t.Errorf("%v", st)
	}
	best := newestPackages([][]stanza{{{"Package": "a", "Version": "1.0-1"}}, {{"Package": "a", "Version": "1.0-1+deb12u1"}}})
	if best["a"]["Version"] != "1.0-1+deb12u1" {
		t.Errorf("newest %v", best)
	}
}
