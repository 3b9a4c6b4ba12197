// Command testsummary prints `go test -json`'s stream as `go test -v`
// would, then, when a test failed, each failed test's last lines again at
// the end: what a CI log shows last is why the run failed.
//
//	go test -json ./test/install/ 2>&1 | testsummary [-lines N]
//
// Without it, a suite whose failed step leaves a long clean-up behind (the
// install suite dumps the release's Pods' logs, then uninstalls) ends its
// output with that clean-up: the failure's own line is hundreds of lines up,
// out of a log's tail. The summary names each failed test that has no
// failed subtest (the step that failed, not the parents that fail with it)
// with the last lines it printed itself (its Fatal among them), and a
// package that failed outside any test (a build error, a timeout's panic)
// with the last lines printed outside its tests. Lines that are not
// test2json events (a build's errors on stderr) pass through unchanged.
//
// It exits 0: the caller's exit status is go test's (set -o pipefail).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	lines := flag.Int("lines", 15, "how many of a failed test's last lines the summary repeats")
	flag.Parse()
	if err := summarize(os.Stdin, os.Stdout, *lines); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(1)
	}
}

// event is the part of a test2json event (`go doc test2json`) read here.
type event struct {
	Action      string
	Package     string
	Test        string
	Output      string
	ImportPath  string // a build-output event's package
	FailedBuild string // on a package's fail: the build that failed
}

// key names a test, or a package's own output when Test is empty.
type key struct{ pkg, test string }

// run is what one test (or a package outside its tests) printed and how it
// ended.
type run struct {
	key
	tail   []string // its last lines, at most the summary's count
	failed bool
	ended  bool // pass, fail or skip came: a test killed by a timeout never ends
	// panicked: it printed a panic; its tail keeps the panic's message and
	// the running tests it names, not the goroutines' stacks that follow
	// (inStacks).
	panicked, inStacks bool
}

func summarize(in io.Reader, out io.Writer, keep int) error {
	// A bufio.Writer's error is sticky: the writes below are checked once,
	// by the last Flush.
	w := bufio.NewWriter(out)
	runs := map[key]*run{}
	var order []*run // first seen first: the summary follows the log's order
	get := func(k key) *run {
		r, ok := runs[k]
		if !ok {
			r = &run{key: k}
			runs[k] = r
			order = append(order, r)
		}
		return r
	}
	builds := map[string][]string{} // a build's output, by import path
	keepLast := func(tail []string, text string) []string {
		tail = append(tail, text)
		if len(tail) > keep {
			tail = tail[len(tail)-keep:]
		}
		return tail
	}
	scanner := bufio.NewScanner(in)
	scanner.Buffer(make([]byte, 64<<10), 16<<20)
	for scanner.Scan() {
		line := scanner.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil || e.Action == "" {
			_, _ = w.Write(line)
			_ = w.WriteByte('\n')
			continue
		}
		switch e.Action {
		case "output":
			_, _ = w.WriteString(e.Output)
			if text := strings.TrimRight(e.Output, "\n"); !framing(text) {
				r := get(key{e.Package, e.Test})
				switch {
				case !r.panicked && strings.HasPrefix(text, "panic: "):
					r.panicked = true
				case r.panicked && strings.HasPrefix(text, "goroutine "):
					r.inStacks = true
				}
				if !r.inStacks {
					r.tail = keepLast(r.tail, text)
				}
			}
		case "build-output":
			_, _ = w.WriteString(e.Output)
			builds[e.ImportPath] = keepLast(builds[e.ImportPath], strings.TrimRight(e.Output, "\n"))
		case "pass", "skip":
			get(key{e.Package, e.Test}).ended = true
		case "fail":
			r := get(key{e.Package, e.Test})
			r.failed, r.ended = true, true
			if e.FailedBuild != "" {
				r.tail = builds[e.FailedBuild]
			}
			if e.Test == "" {
				// A test of the package that never ended was killed with
				// it (a timeout, a crash): it failed.
				for _, t := range order {
					if t.pkg == e.Package && t.test != "" && !t.ended {
						t.failed = true
					}
				}
			}
		}
		// Each line as it comes: the log shows a long suite's progress.
		_ = w.Flush()
	}
	if err := scanner.Err(); err != nil {
		_ = w.Flush()
		return err
	}
	var failed []*run
	for _, r := range order {
		if r.failed && reported(r, runs) {
			failed = append(failed, r)
		}
	}
	if len(failed) == 0 {
		return w.Flush()
	}
	fmt.Fprintf(w, "\nFailed, each with the last lines it printed (the whole output is above):\n")
	for _, r := range failed {
		if r.test == "" {
			fmt.Fprintf(w, "\n--- FAIL: package %s, outside its tests\n", r.pkg)
		} else {
			fmt.Fprintf(w, "\n--- FAIL: %s (%s)\n", r.test, r.pkg)
		}
		for _, l := range r.tail {
			fmt.Fprintln(w, l)
		}
	}
	return w.Flush()
}

// reported says whether a failed run is one the summary names: a test none
// of whose subtests failed; a package none of whose tests failed (a build
// error) or that printed a panic outside them (a timeout).
func reported(r *run, runs map[key]*run) bool {
	if r.test == "" && r.panicked {
		return true
	}
	for k, other := range runs {
		if other == r || !other.failed || k.pkg != r.pkg || k.test == "" {
			continue
		}
		if r.test == "" || strings.HasPrefix(k.test, r.test+"/") {
			return false
		}
	}
	return true
}

// framing: go test's own lines around a test's output, which say nothing
// the summary's header does not.
func framing(line string) bool {
	t := strings.TrimSpace(line)
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME", "--- PASS", "--- FAIL", "--- SKIP"} {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return t == "" || t == "PASS" || t == "FAIL"
}
