package sandbox

import (
	"bufio"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// The dynamic linker's search is reproduced here, roughly, to find which
// directories the program's libraries live in: the confined process may
// read beneath those directories and nowhere else for code. Directories
// rather than the exact files, because libraries load others at run time
// that no ELF header names (libgcc_s for thread cancellation, OpenSSL's
// providers, glibc's gconv and NSS modules); they live beside or beneath
// the libraries that load them. Running ldd instead would execute the
// linker on every new binary; parsing the headers with debug/elf needs no
// process.

// multiarchTriplet is Debian's library directory name per GOARCH.
var multiarchTriplet = map[string]string{
	"amd64": "x86_64-linux-gnu",
	"arm64": "aarch64-linux-gnu",
}

// systemLibDirs are the dynamic linker's built-in directories: Debian's
// multiarch ones, then the traditional ones (lib64 for other
// distributions).
func systemLibDirs() []string {
	var dirs []string
	if t, ok := multiarchTriplet[runtime.GOARCH]; ok {
		dirs = append(dirs, "/lib/"+t, "/usr/lib/"+t)
	}
	return append(dirs, "/lib64", "/usr/lib64", "/lib", "/usr/lib")
}

// ldSoConfDirs reads /etc/ld.so.conf and its includes: the directories
// ldconfig put into /etc/ld.so.cache.
func ldSoConfDirs() []string {
	var dirs []string
	seen := map[string]bool{}
	var read func(path string, depth int)
	read = func(path string, depth int) {
		if depth > 8 || seen[path] {
			return
		}
		seen[path] = true
		f, err := os.Open(path)
		if err != nil {
			return
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line, _, _ := strings.Cut(sc.Text(), "#")
			line = strings.TrimSpace(line)
			switch {
			case line == "":
			case strings.HasPrefix(line, "include") && len(line) > 7 && (line[7] == ' ' || line[7] == '\t'):
				pattern := strings.TrimSpace(line[8:])
				if !filepath.IsAbs(pattern) {
					pattern = filepath.Join(filepath.Dir(path), pattern)
				}
				matches, _ := filepath.Glob(pattern)
				for _, m := range matches {
					read(m, depth+1)
				}
			case strings.HasPrefix(line, "hwcap"):
			default:
				dirs = append(dirs, line)
			}
		}
	}
	read("/etc/ld.so.conf", 0)
	return dirs
}

// inspect finds what the ELF executable at path needs to start.
func inspect(path string) (program, error) {
	f, err := elf.Open(path)
	if err != nil {
		return program{}, fmt.Errorf("sandbox: program %s is not an ELF executable: %w", path, err)
	}
	defer f.Close()
	prog := program{exec: []string{path}}
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return program{}, fmt.Errorf("sandbox: program %s: reading its ELF interpreter: %w", path, err)
		}
		interp := strings.TrimRight(string(b), "\x00")
		if !filepath.IsAbs(interp) {
			return program{}, fmt.Errorf("sandbox: program %s: ELF interpreter %q is not absolute", path, interp)
		}
		prog.exec = append(prog.exec, interp)
		prog.dynamic = true
	}
	if !prog.dynamic {
		return prog, nil
	}

	defaults := append(ldSoConfDirs(), systemLibDirs()...)
	dirs := map[string]bool{}
	visited := map[string]bool{}
	var walk func(f *elf.File, origin string)
	walk = func(f *elf.File, origin string) {
		needed, _ := f.ImportedLibraries()
		search := runPaths(f, origin)
		search = append(search, defaults...)
		for _, name := range needed {
			lib, lf := findLibrary(name, search, f)
			if lf == nil {
				// Left to the dynamic linker, whose error names it.
				continue
			}
			real, err := filepath.EvalSymlinks(lib)
			if err != nil || visited[real] {
				lf.Close()
				continue
			}
			visited[real] = true
			dirs[filepath.Dir(real)] = true
			walk(lf, filepath.Dir(real))
			lf.Close()
		}
	}
	walk(f, filepath.Dir(path))
	for d := range dirs {
		prog.libDirs = append(prog.libDirs, d)
	}
	slices.Sort(prog.libDirs)
	return prog, nil
}

// runPaths are the DT_RUNPATH (else DT_RPATH) directories of f, with
// $ORIGIN expanded; other substitutions are rare and left out.
func runPaths(f *elf.File, origin string) []string {
	list, _ := f.DynString(elf.DT_RUNPATH)
	if len(list) == 0 {
		list, _ = f.DynString(elf.DT_RPATH)
	}
	var dirs []string
	for _, l := range list {
		for _, d := range strings.Split(l, ":") {
			d = strings.ReplaceAll(strings.ReplaceAll(d, "${ORIGIN}", origin), "$ORIGIN", origin)
			if filepath.IsAbs(d) && !strings.Contains(d, "$") {
				dirs = append(dirs, d)
			}
		}
	}
	return dirs
}

// findLibrary looks name up in dirs and opens the first ELF file of the
// loader's class and machine (skipping, say, 32-bit libraries).
func findLibrary(name string, dirs []string, loader *elf.File) (string, *elf.File) {
	candidates := dirs
	if strings.Contains(name, "/") {
		candidates = []string{""}
	}
	for _, d := range candidates {
		p := name
		if d != "" {
			p = filepath.Join(d, name)
		}
		lf, err := elf.Open(p)
		if err != nil {
			continue
		}
		if lf.Class == loader.Class && lf.Machine == loader.Machine {
			return p, lf
		}
		lf.Close()
	}
	return "", nil
}
