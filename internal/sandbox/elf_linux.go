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

// inspectInRoot finds what the ELF executable at path, inside the root
// file system root, needs to start from that root alone: the root's ELF
// interpreter (its PT_INTERP resolved inside root) and the directories of
// its libraries, searched in the root's library directories. Every file
// found must resolve inside root: a link leading out is refused, not
// followed, so the host's glibc never mixes with the root's.
func inspectInRoot(root, path string) (program, error) {
	if !filepath.IsAbs(root) {
		return program{}, fmt.Errorf("sandbox: Root %q is not absolute", root)
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return program{}, fmt.Errorf("sandbox: Root: %w", err)
	}
	inside := func(what, p string) (string, error) {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return "", fmt.Errorf("sandbox: %s %s: %w", what, p, err)
		}
		if !within(real, realRoot) {
			return "", fmt.Errorf("sandbox: %s %s resolves to %s, outside Root %s", what, p, real, root)
		}
		return real, nil
	}
	program := program{dynamic: true}
	realPath, err := inside("program", path)
	if err != nil {
		return program, err
	}
	f, err := elf.Open(realPath)
	if err != nil {
		return program, fmt.Errorf("sandbox: program %s is not an ELF executable: %w", path, err)
	}
	defer f.Close()
	var interp string
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return program, fmt.Errorf("sandbox: program %s: reading its ELF interpreter: %w", path, err)
			}
			interp = strings.TrimRight(string(b), "\x00")
		}
	}
	if !filepath.IsAbs(interp) {
		return program, fmt.Errorf("sandbox: program %s in Root has no absolute ELF interpreter (%q): only a dynamically linked program runs through the root's loader", path, interp)
	}
	realInterp, err := inside("ELF interpreter", filepath.Join(realRoot, interp))
	if err != nil {
		return program, err
	}
	program.exec = []string{realPath, realInterp}

	for _, d := range systemLibDirs() {
		if st, err := os.Stat(filepath.Join(realRoot, d)); err == nil && st.IsDir() {
			program.searchDirs = append(program.searchDirs, filepath.Join(realRoot, d))
		}
	}
	dirs := map[string]bool{filepath.Dir(realInterp): true}
	visited := map[string]bool{}
	var walkErr error
	var walk func(f *elf.File)
	walk = func(f *elf.File) {
		needed, _ := f.ImportedLibraries()
		for _, name := range needed {
			if walkErr != nil {
				return
			}
			lib, lf := findLibrary(name, program.searchDirs, f)
			if lf == nil {
				walkErr = fmt.Errorf("sandbox: program %s needs %s, which Root %s does not hold in %s", path, name, root, strings.Join(program.searchDirs, ", "))
				return
			}
			real, err := inside("library", lib)
			if err != nil || visited[real] {
				lf.Close()
				if err != nil {
					walkErr = err
				}
				continue
			}
			visited[real] = true
			dirs[filepath.Dir(real)] = true
			walk(lf)
			lf.Close()
		}
	}
	walk(f)
	if walkErr != nil {
		return program, walkErr
	}
	for d := range dirs {
		program.libDirs = append(program.libDirs, d)
	}
	slices.Sort(program.libDirs)
	return program, nil
}
