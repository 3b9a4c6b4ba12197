package suite

import (
	"fmt"
	"strings"

	"github.com/gatehouse-dev/gatehouse/internal/textcut"
)

const (
	// maxFailureMessage bounds a failure message, a render error, a test
	// name and an assertion description in a Message.
	maxFailureMessage = 300
	// maxMessageBytes bounds Report.Message, which becomes an admission
	// denial reason and a status message.
	maxMessageBytes = 4096
	// messageReserve keeps room in Message for the "... and N more" lines.
	messageReserve = 80
)

// Message is the report as an admission denial reason, empty when no test
// failed:
//
//	Validation tests failed: <failed>/<total> tests failed
//
//	Failed tests:
//
//	- Test: <name>
//	  Rendering failed: <render error>
//	  Assertion failed: <description> - <message>
//
// with a blank line between failed tests. It is at most about 4 KB: the
// first failed tests are named with their failures, then "... and N more
// failed tests" (or "... and N more failed assertions" within a test)
// stands for the rest. Continuation lines of a multi-line text are
// indented by four spaces.
func (r Report) Message() string {
	var failed []Result
	for _, result := range r.Results {
		if !result.Passed {
			failed = append(failed, result)
		}
	}
	if r.Failed == 0 && len(failed) == 0 {
		return ""
	}

	var b strings.Builder
	fmt.Fprintf(&b, "Validation tests failed: %d/%d tests failed\n\nFailed tests:\n", r.Failed, r.Total)
	for i, result := range failed {
		header := "\n- Test: " + indent(bound(result.Name)) + "\n"
		var lines []string
		if result.RenderError != "" {
			lines = append(lines, "  Rendering failed: "+indent(bound(result.RenderError))+"\n")
		}
		for _, failure := range result.Failures {
			lines = append(lines, "  Assertion failed: "+indent(bound(failure.Assertion))+" - "+indent(bound(failure.Message))+"\n")
		}
		first := ""
		if len(lines) > 0 {
			first = lines[0]
		}
		if i > 0 && b.Len()+len(header)+len(first) > maxMessageBytes-messageReserve {
			fmt.Fprintf(&b, "\n... and %d more failed tests\n", len(failed)-i)
			break
		}
		b.WriteString(header)
		for j, line := range lines {
			if j > 0 && b.Len()+len(line) > maxMessageBytes-messageReserve {
				fmt.Fprintf(&b, "  ... and %d more failed assertions\n", len(lines)-j)
				break
			}
			b.WriteString(line)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// indent keeps a multi-line text inside its list item.
func indent(s string) string {
	return strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

// bound shortens a message to maxFailureMessage bytes.
func bound(s string) string {
	return truncate(s, maxFailureMessage)
}

// truncate shortens s to at most n bytes, ending in "…" when cut, never
// splitting a UTF-8 sequence.
func truncate(s string, n int) string { return textcut.Bound(s, n, "…") }
