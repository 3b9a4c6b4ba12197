// Command testsummary runs `go test -json` and prints its stream as go test
// would, then, when a test failed, each failed test's last lines again at
// the end: what a CI log shows last is why the run failed.
//
//	testsummary [-quiet] [-lines N] go test -json [FLAGS] PACKAGES
//
// Without it, the reason is often far up the log: a suite whose failed step
// leaves a long clean-up behind (the install suite dumps the release's Pods'
// logs, then uninstalls) ends with that clean-up, and a failed package in
// the unit stage is followed by the "ok" lines of every package after it.
// The summary names each failed test that has no failed subtest (the step
// that failed, not the parents that fail with it) with the last lines it
// printed from its _test.go files (its Fatal among them, not a logger's
// lines that a clean-up prints after it; a panic's message and the tests
// it names, not the goroutines' stacks), and a package that failed outside
// any test (a build error, a timeout's panic) with its last lines.
//
// Without -quiet the stream is printed as `go test -v` prints it; with
// -quiet as go test without -v does: a test's lines only when it fails.
// Lines that are not test2json events (the go command's own messages)
// pass through unchanged. testsummary exits with the command's status.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
)

func main() {
	var opts options
	flag.IntVar(&opts.lines, "lines", 15, "how many of a failed test's last lines the summary repeats")
	flag.BoolVar(&opts.quiet, "quiet", false, "print a test's lines only when it fails, as go test without -v does")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: testsummary [-quiet] [-lines N] go test -json [FLAGS] PACKAGES")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	os.Exit(run(flag.Args(), opts, os.Stdout))
}

// run runs the command with its stdout and stderr into one pipe, in the
// order it writes them, summarizes that stream on out, and returns the
// command's exit status.
func run(args []string, opts options, out io.Writer) int {
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		return 1
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, w, w
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		return 1
	}
	w.Close()
	summaryErr := summarize(r, out, opts)
	if summaryErr != nil {
		// Keep the pipe drained: the command must not block on a full pipe.
		_, _ = io.Copy(out, r)
	}
	waitErr := cmd.Wait()
	if summaryErr != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", summaryErr)
	}
	var exit *exec.ExitError
	switch {
	case errors.As(waitErr, &exit):
		if code := exit.ExitCode(); code > 0 {
			return code
		}
		return 1 // killed by a signal
	case waitErr != nil:
		fmt.Fprintln(os.Stderr, "testsummary:", waitErr)
		return 1
	case summaryErr != nil:
		return 1
	}
	return 0
}

type options struct {
	lines int  // how many last lines of a failed test the summary repeats
	quiet bool // a test's lines only when it fails
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

// test is what one test (or a package, outside its tests) printed and how
// it ended.
type test struct {
	key
	tail []string // its last lines, at most options.lines, go test's framing left out
	// own is the last of its lines written from a _test.go file (t.Error,
	// t.Fatal and t.Log, a helper's at its caller), with their continuation
	// lines: not the logs of the code under test that go to t.Log through
	// a logger, which a clean-up after the failure prints in quantity.
	own    []string
	inOwn  bool     // the line before was one of own, or continued one
	held   []string // -quiet: everything it printed, until it ends
	failed bool
	ended  bool // pass, fail or skip came: a test killed by a timeout never ends
	// panicked: it printed a panic; its tail keeps the panic's message and
	// the running tests it names, not the goroutines' stacks that follow
	// (inStacks).
	panicked, inStacks bool
}

// summarize copies the stream in to out as go test prints it, then the
// summary of what failed.
func summarize(in io.Reader, out io.Writer, opts options) error {
	// A bufio.Writer's error is sticky: the writes below are checked once,
	// by the last Flush.
	w := bufio.NewWriter(out)
	tests := map[key]*test{}
	var order []*test // first seen first: the summary follows the log's order
	get := func(k key) *test {
		t, ok := tests[k]
		if !ok {
			t = &test{key: k}
			tests[k] = t
			order = append(order, t)
		}
		return t
	}
	keepLast := func(tail []string, text string) []string {
		tail = append(tail, text)
		if len(tail) > opts.lines {
			tail = tail[len(tail)-opts.lines:]
		}
		return tail
	}
	release := func(t *test) {
		for _, s := range t.held {
			_, _ = w.WriteString(s)
		}
		t.held = nil
	}
	builds := map[string][]string{} // a build's output, by import path
	scanner := bufio.NewScanner(in)
	scanner.Buffer(make([]byte, 64<<10), 16<<20)
	for scanner.Scan() {
		line := scanner.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil || e.Action == "" {
			_, _ = w.Write(line)
			_ = w.WriteByte('\n')
			_ = w.Flush()
			continue
		}
		switch e.Action {
		case "output":
			text := strings.TrimRight(e.Output, "\n")
			t := get(key{e.Package, e.Test})
			switch {
			case !opts.quiet:
				_, _ = w.WriteString(e.Output)
			case e.Test != "":
				t.held = append(t.held, e.Output)
			case text != "PASS": // a package's own lines but -v's PASS
				_, _ = w.WriteString(e.Output)
			}
			if framing(text) {
				break
			}
			switch {
			case !t.panicked && strings.HasPrefix(text, "panic: "):
				t.panicked = true
			case t.panicked && strings.HasPrefix(text, "goroutine "):
				t.inStacks = true
			}
			if !t.inStacks {
				t.tail = keepLast(t.tail, text)
			}
			if m := location.FindStringSubmatch(text); m != nil {
				t.inOwn = strings.HasSuffix(m[1], "_test.go")
			}
			if t.inOwn {
				t.own = keepLast(t.own, text)
			}
		case "build-output":
			_, _ = w.WriteString(e.Output)
			builds[e.ImportPath] = keepLast(builds[e.ImportPath], strings.TrimRight(e.Output, "\n"))
		case "pass", "skip":
			t := get(key{e.Package, e.Test})
			t.ended, t.held = true, nil
		case "fail":
			t := get(key{e.Package, e.Test})
			t.failed, t.ended = true, true
			release(t)
			if e.FailedBuild != "" {
				t.tail = builds[e.FailedBuild]
			}
			if e.Test == "" {
				// A test of the package that never ended was killed with
				// it (a timeout, a crash): it failed, and what it held is
				// its panic.
				for _, o := range order {
					if o.pkg == e.Package && o.test != "" && !o.ended {
						o.failed = true
						release(o)
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
	var failed []*test
	for _, t := range order {
		if t.failed && reported(t, tests) {
			failed = append(failed, t)
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(w, "\nFailed, each with the last lines it printed (the whole output is above):\n")
	}
	for _, t := range failed {
		if t.test == "" {
			fmt.Fprintf(w, "\n--- FAIL: package %s, outside its tests\n", t.pkg)
		} else {
			fmt.Fprintf(w, "\n--- FAIL: %s (%s)\n", t.test, t.pkg)
		}
		lines := t.tail
		if !t.panicked && len(t.own) > 0 {
			lines = t.own
		}
		for _, l := range lines {
			fmt.Fprintln(w, l)
		}
	}
	return w.Flush()
}

// reported says whether a failed test is one the summary names: a test
// none of whose subtests failed; a package none of whose tests failed (a
// build error) or that printed a panic outside them.
func reported(t *test, tests map[key]*test) bool {
	if t.test == "" && t.panicked {
		return true
	}
	for k, other := range tests {
		if other == t || !other.failed || k.pkg != t.pkg || k.test == "" {
			continue
		}
		if t.test == "" || strings.HasPrefix(k.test, t.test+"/") {
			return false
		}
	}
	return true
}

// location is the file and line a test's log line starts with.
var location = regexp.MustCompile(`^\s+([^\s:]+\.go):\d+: `)

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
