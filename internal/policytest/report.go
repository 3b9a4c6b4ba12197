package policytest

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
)

// Output formats of Write.
const (
	OutputSummary = "summary"
	OutputJSON    = "json"
	OutputJUnit   = "junit"
)

// Outputs are the formats Write knows.
var Outputs = []string{OutputSummary, OutputJSON, OutputJUnit}

// Status is the exit status of a run: 0 every test passed, 1 a test
// failed, 2 a suite could not run (invalid, or an error).
func Status(results []SuiteResult) int {
	status := 0
	for _, s := range results {
		if s.Err != nil {
			return 2
		}
		for _, r := range s.Results {
			if !r.Passed {
				status = 1
			}
		}
	}
	return status
}

// Write reports results in format.
func Write(w io.Writer, format string, results []SuiteResult) error {
	switch format {
	case OutputSummary, "":
		return writeSummary(w, results)
	case OutputJSON:
		return writeJSONReport(w, results)
	case OutputJUnit:
		return writeJUnit(w, results)
	}
	return fmt.Errorf("output %q: want %s", format, strings.Join(Outputs, ", "))
}

func writeSummary(w io.Writer, results []SuiteResult) error {
	var total, failed, broken int
	for _, s := range results {
		fmt.Fprintf(w, "%s (%s)\n", s.Name, s.File)
		for _, r := range s.Results {
			total++
			mark := "PASS"
			if !r.Passed {
				mark = "FAIL"
				failed++
			}
			fmt.Fprintf(w, "  %s  %s\n", mark, r.Name)
			if !r.Passed {
				for _, f := range r.Failures {
					fmt.Fprintf(w, "        %s\n", f)
				}
			}
		}
		if s.Err != nil {
			broken++
			fmt.Fprintf(w, "  ERROR %v\n", s.Err)
		}
	}
	_, err := fmt.Fprintf(w, "\n%d/%d tests passed", total-failed, total)
	if broken > 0 {
		_, err = fmt.Fprintf(w, "; %d suites could not run", broken)
	}
	fmt.Fprintln(w)
	return err
}

type jsonReport struct {
	Suites []jsonSuite `json:"suites"`
	Total  int         `json:"total"`
	Passed int         `json:"passed"`
	Failed int         `json:"failed"`
	// Errors counts the suites that could not run.
	Errors int `json:"errors"`
}

type jsonSuite struct {
	Name    string       `json:"name"`
	File    string       `json:"file"`
	Error   string       `json:"error,omitempty"`
	Results []jsonResult `json:"results"`
}

type jsonResult struct {
	Name            string   `json:"name"`
	Passed          bool     `json:"passed"`
	Got             string   `json:"got,omitempty"`
	Failures        []string `json:"failures,omitempty"`
	DurationSeconds float64  `json:"durationSeconds"`
}

func writeJSONReport(w io.Writer, results []SuiteResult) error {
	out := jsonReport{Suites: []jsonSuite{}}
	for _, s := range results {
		js := jsonSuite{Name: s.Name, File: s.File, Results: []jsonResult{}}
		if s.Err != nil {
			js.Error = s.Err.Error()
			out.Errors++
		}
		for _, r := range s.Results {
			out.Total++
			if r.Passed {
				out.Passed++
			} else {
				out.Failed++
			}
			js.Results = append(js.Results, jsonResult{Name: r.Name, Passed: r.Passed, Got: r.Got, Failures: r.Failures, DurationSeconds: r.Duration.Seconds()})
		}
		out.Suites = append(out.Suites, js)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// JUnit XML as CI systems read it (Jenkins, GitLab, GitHub's test
// reporters): a testsuite per suite, a testcase per test, a failure per
// failed test, an error for a suite that could not run.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	File     string      `xml:"file,attr,omitempty"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Error     *junitMessage `xml:"error,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

func writeJUnit(w io.Writer, results []SuiteResult) error {
	out := junitSuites{}
	for _, s := range results {
		js := junitSuite{Name: s.Name, File: s.File}
		var seconds float64
		for _, r := range s.Results {
			seconds += r.Duration.Seconds()
			c := junitCase{Name: r.Name, ClassName: s.Name, Time: fmt.Sprintf("%.3f", r.Duration.Seconds())}
			if !r.Passed {
				c.Failure = &junitMessage{Message: fmt.Sprintf("%d expectations not met", len(r.Failures)), Text: strings.Join(r.Failures, "\n")}
				js.Failures++
			}
			js.Cases = append(js.Cases, c)
		}
		if s.Err != nil {
			js.Errors++
			js.Cases = append(js.Cases, junitCase{Name: "suite", ClassName: s.Name, Time: "0.000", Error: &junitMessage{Message: "the suite could not run", Text: s.Err.Error()}})
		}
		js.Tests = len(js.Cases)
		js.Time = fmt.Sprintf("%.3f", seconds)
		out.Tests += js.Tests
		out.Failures += js.Failures
		out.Errors += js.Errors
		out.Suites = append(out.Suites, js)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
