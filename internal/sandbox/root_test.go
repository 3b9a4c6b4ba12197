package sandbox_test

import (
	"debug/elf"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/internal/sandbox"
)

// hostTriplet is Debian's multiarch directory of this machine.
func hostTriplet(t *testing.T) string {
	t.Helper()
	triplet, ok := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[runtime.GOARCH]
	if !ok {
		t.Fatalf("no Debian multiarch directory for %s", runtime.GOARCH)
	}
	return triplet
}

// copyFile copies a host file into root at the same path below /usr
// (merged /usr, as Debian 13 lays a root out).
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o755); err != nil {
		t.Fatal(err)
	}
}

// shellRoot lays out a root file system holding this machine's /bin/sh
// with its ELF interpreter and libraries, as an unpacked Debian 13 root
// is laid out: files under /usr, /lib64 and /lib links into it. It
// returns the root and the shell's path inside it.
func shellRoot(t *testing.T) (root, shell string) {
	t.Helper()
	root = t.TempDir()
	host, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	shell = filepath.Join(root, "usr/bin/sh")
	copyFile(t, host, shell)
	f, err := elf.Open(host)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	libDir := "/usr/lib/" + hostTriplet(t)
	for _, lib := range libs {
		real, err := filepath.EvalSymlinks(filepath.Join("/lib", hostTriplet(t), lib))
		if err != nil {
			t.Fatal(err)
		}
		copyFile(t, real, filepath.Join(root, libDir, lib))
	}
	var interp string
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				t.Fatal(err)
			}
			interp = strings.TrimRight(string(b), "\x00")
		}
	}
	realInterp, err := filepath.EvalSymlinks(interp)
	if err != nil {
		t.Fatal(err)
	}
	// The loader's file beside the libraries, and the PT_INTERP path
	// (/lib64/... or /lib/...) reaching it through links, as base-files
	// and libc6 make them.
	copyFile(t, realInterp, filepath.Join(root, libDir, filepath.Base(realInterp)))
	top := strings.Split(strings.TrimPrefix(interp, "/"), "/")[0] // lib64 or lib
	if err := os.MkdirAll(filepath.Join(root, "usr", top), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "usr", strings.TrimPrefix(interp, "/"))
	if _, err := os.Lstat(link); os.IsNotExist(err) {
		// Relative, as libc6's: an absolute link would name the host's.
		target, err := filepath.Rel(filepath.Dir(link), filepath.Join(root, libDir, filepath.Base(realInterp)))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("usr/"+top, filepath.Join(root, top)); err != nil {
		t.Fatal(err)
	}
	return root, shell
}

// TestRootRunsTheProgramFromItsOwnFiles: a program in a Root (an unpacked
// root file system, such as Debian 13's haproxy with its newer glibc on a
// Debian 12 machine) runs through the root's loader and libraries, may
// read none of the host's libraries, and a root that lacks a library or
// links one from the host is refused before anything runs.
func TestRootRunsTheProgramFromItsOwnFiles(t *testing.T) {
	requireConfinement(t)
	hostLibc := filepath.Join("/usr/lib", hostTriplet(t), "libc.so.6")
	if _, err := os.ReadFile(hostLibc); err != nil {
		t.Fatalf("control: the test cannot read %s itself: %v", hostLibc, err)
	}
	script := `echo "ran:$0"; if read -r l < ` + hostLibc + `; then echo "LEAK read the host's libc"; fi; echo done`

	// Control: the host's /bin/sh, without a root, may read the host's
	// library directory (its libraries are there), so the check below
	// can tell.
	r := run(t, t.Context(), sandbox.Spec{Path: "/bin/sh", Args: []string{"-c", script}, Dir: t.TempDir()})
	if !strings.Contains(r.stdout, "LEAK") {
		t.Fatalf("control: the host's shell could not read its own libc, so the check below proves nothing:\n%s\n%s", r.stdout, r.stderr)
	}

	root, shell := shellRoot(t)
	r = run(t, t.Context(), sandbox.Spec{Root: root, Path: shell, Args: []string{"-c", script}, Dir: t.TempDir()})
	if r.err != nil || !strings.Contains(r.stdout, "ran:sh") || !strings.Contains(r.stdout, "done") {
		t.Fatalf("the shell in the root did not run (err %v):\n%s\n%s", r.err, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "LEAK") {
		t.Errorf("a program in a root read the host's libraries:\n%s", r.stdout)
	}

	t.Run("a program outside the root is refused", func(t *testing.T) {
		_, err := sandbox.Command(t.Context(), sandbox.Spec{Root: root, Path: "/bin/sh", Dir: t.TempDir()})
		if err == nil || !strings.Contains(err.Error(), "outside Root") {
			t.Fatalf("got %v, want the program refused as outside Root", err)
		}
	})
	t.Run("a missing library is refused, not taken from the host", func(t *testing.T) {
		lib := filepath.Join(root, "usr/lib", hostTriplet(t), "libc.so.6")
		saved, err := os.ReadFile(lib)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(lib); err != nil {
			t.Fatal(err)
		}
		defer os.WriteFile(lib, saved, 0o755)
		_, err = sandbox.Command(t.Context(), sandbox.Spec{Root: root, Path: shell, Dir: t.TempDir()})
		if err == nil || !strings.Contains(err.Error(), "needs libc.so.6, which Root") {
			t.Fatalf("got %v, want the missing libc.so.6 named", err)
		}

		t.Run("and so is a link to the host's", func(t *testing.T) {
			if err := os.Symlink(hostLibc, lib); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(lib)
			_, err = sandbox.Command(t.Context(), sandbox.Spec{Root: root, Path: shell, Dir: t.TempDir()})
			if err == nil || !strings.Contains(err.Error(), "outside Root") {
				t.Fatalf("got %v, want the host's libc refused as outside Root", err)
			}
		})
	})
}
