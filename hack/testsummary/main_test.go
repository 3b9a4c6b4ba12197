package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// goTestJSON runs `go test -json` on a package of one file, src, and
// returns its stream: the summary is tested against what this Go release
// prints, not against a stream written by hand.
func goTestJSON(t *testing.T, src string, args ...string) []byte {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.test/suite\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "suite_test.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", append([]string{"test", "-json", "-count=1"}, append(args, ".")...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the suite passed; it must fail:\n%s", out)
	}
	return out
}

func summary(t *testing.T, stream []byte) (all, tail string) {
	t.Helper()
	return summaryOf(t, stream, options{lines: 15})
}

func summaryOf(t *testing.T, stream []byte, opts options) (all, tail string) {
	t.Helper()
	var out bytes.Buffer
	if err := summarize(bytes.NewReader(stream), &out, opts); err != nil {
		t.Fatal(err)
	}
	all = out.String()
	_, tail, found := strings.Cut(all, "\nFailed, each with the last lines it printed")
	if !found {
		t.Fatalf("no summary at the end:\n%s", all)
	}
	return all, tail
}

// lifeSuite is the install suite's shape: a step fails, then its parent's
// clean-up prints far more than a log's tail.
const lifeSuite = `package suite

import "testing"

func TestLife(t *testing.T) {
	t.Cleanup(func() {
		for i := 0; i < 200; i++ {
			t.Logf("clean-up line %d", i)
		}
	})
	t.Run("1 install", func(t *testing.T) {
		t.Log("helm install done")
		t.Fatal("the step's own failure")
	})
	t.Run("2 upgrade", func(t *testing.T) {})
}

func TestPasses(t *testing.T) { t.Log("a passing test's line") }
`

// The install suite's shape: a step fails, then its parent's clean-up
// prints far more than a log's tail. The summary ends the output with the
// step's failure, not the clean-up.
func TestTheFailedStepEndsTheOutput(t *testing.T) {
	all, tail := summary(t, goTestJSON(t, lifeSuite))
	for _, want := range []string{"=== RUN   TestLife/1_install", "clean-up line 199", "a passing test's line"} {
		if !strings.Contains(all, want) {
			t.Errorf("the stream lost %q:\n%s", want, all)
		}
	}
	if !strings.Contains(tail, "--- FAIL: TestLife/1_install (example.test/suite)") || !strings.Contains(tail, "the step's own failure") || !strings.Contains(tail, "helm install done") {
		t.Errorf("the summary does not show the step's failure:\n%s", tail)
	}
	for _, not := range []string{"TestLife (", "clean-up line", "TestPasses", "2_upgrade"} {
		if strings.Contains(tail, not) {
			t.Errorf("the summary names %q, which did not fail on its own:\n%s", not, tail)
		}
	}
}

// A package that does not build has no test to name: the summary repeats
// the compiler's error.
func TestABuildErrorIsSummarized(t *testing.T) {
	_, tail := summary(t, goTestJSON(t, `package suite

import "testing"

func TestX(t *testing.T) { undefinedName() }
`))
	if !strings.Contains(tail, "package example.test/suite, outside its tests") || !strings.Contains(tail, "undefined: undefinedName") {
		t.Errorf("the summary does not show the build's error:\n%s", tail)
	}
}

// A suite killed by -timeout: its panic names the test that was running.
func TestATimeoutIsSummarized(t *testing.T) {
	_, tail := summary(t, goTestJSON(t, `package suite

import (
	"testing"
	"time"
)

func TestHangs(t *testing.T) {
	t.Log("waiting for a control plane")
	time.Sleep(time.Minute)
}
`, "-timeout", "1s"))
	for _, want := range []string{"--- FAIL: TestHangs (example.test/suite)", "waiting for a control plane", "panic: test timed out after 1s", "running tests:"} {
		if !strings.Contains(tail, want) {
			t.Errorf("the summary does not show %q:\n%s", want, tail)
		}
	}
	if strings.Contains(tail, "goroutine ") {
		t.Errorf("the summary repeats the goroutines' stacks:\n%s", tail)
	}
}

// Lines that are not test2json's (stderr, make's) pass through in order.
func TestOtherLinesPassThrough(t *testing.T) {
	var out bytes.Buffer
	in := "make: starting\n{\"Action\":\"output\",\"Package\":\"p\",\"Test\":\"TestA\",\"Output\":\"    a_test.go:1: hello\\n\"}\n{not json\n{\"Action\":\"pass\",\"Package\":\"p\",\"Test\":\"TestA\"}\n"
	if err := summarize(strings.NewReader(in), &out, options{lines: 15}); err != nil {
		t.Fatal(err)
	}
	if want := "make: starting\n    a_test.go:1: hello\n{not json\n"; out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
}

// -quiet prints as go test without -v: a passing test's lines are gone, a
// failed one's are there, and the package's result line; the summary is
// the same.
func TestQuietPrintsOnlyWhatFailed(t *testing.T) {
	stream := goTestJSON(t, lifeSuite)
	all, tail := summaryOf(t, stream, options{lines: 15, quiet: true})
	body, _, _ := strings.Cut(all, "\nFailed, each with")
	for _, want := range []string{"the step's own failure", "clean-up line 199", "--- FAIL: TestLife/1_install", "FAIL\texample.test/suite"} {
		if !strings.Contains(body, want) {
			t.Errorf("-quiet lost %q:\n%s", want, body)
		}
	}
	for _, not := range []string{"a passing test's line", "TestPasses", "2_upgrade", "=== RUN   TestPasses"} {
		if strings.Contains(body, not) {
			t.Errorf("-quiet printed %q, of a test that passed:\n%s", not, body)
		}
	}
	_, verboseTail := summary(t, stream)
	if tail != verboseTail {
		t.Errorf("the summary differs with -quiet:\n%s\nwithout:\n%s", tail, verboseTail)
	}
}

// testsummary's status is the command's: make's stage fails when go test
// does, and passes when it does.
func TestExitStatusIsTheCommands(t *testing.T) {
	for _, tc := range []struct {
		script string
		want   int
	}{
		{"echo '{\"Action\":\"pass\",\"Package\":\"p\"}'", 0},
		{"echo 'go: a message on stderr' >&2; exit 3", 3},
		{"kill -9 $$", 1},
	} {
		var out bytes.Buffer
		if got := run([]string{"sh", "-c", tc.script}, options{lines: 15}, &out); got != tc.want {
			t.Errorf("%s: status %d, want %d (output %q)", tc.script, got, tc.want, out.String())
		}
		if strings.Contains(tc.script, "stderr") && !strings.Contains(out.String(), "go: a message on stderr") {
			t.Errorf("the command's stderr was not printed: %q", out.String())
		}
	}
}

// A test's clean-up after its failure logs the code under test's shutdown
// (a manager's loggers write to t.Log from their own files): the summary
// shows the test's own lines, its failure among them, not those.
func TestTheTestsOwnLinesOutlastTheLoggersLines(t *testing.T) {
	stream := "" +
		`{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:10: waiting\n"}` + "\n" +
		`{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:12: the object has been modified\n"}` + "\n" +
		`{"Action":"output","Package":"p","Test":"TestA","Output":"        its second line\n"}` + "\n" +
		strings.Repeat(`{"Action":"output","Package":"p","Test":"TestA","Output":"    controller.go:330: All workers finished\n"}`+"\n", 20) +
		`{"Action":"fail","Package":"p","Test":"TestA"}` + "\n"
	_, tail := summary(t, []byte(stream))
	for _, want := range []string{"a_test.go:10: waiting", "a_test.go:12: the object has been modified", "its second line"} {
		if !strings.Contains(tail, want) {
			t.Errorf("the summary lost %q:\n%s", want, tail)
		}
	}
	if strings.Contains(tail, "controller.go") {
		t.Errorf("the summary shows the logger's lines:\n%s", tail)
	}
}
