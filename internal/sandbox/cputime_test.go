package sandbox

import (
	"testing"
	"time"
)

// TestCPUTimeReadsTheProxysLineOnly: the line a runner's proxy adds is read
// and taken out only where the proxy writes it (the last of the prefix, at
// a line's start, a duration, the suffix); anything else a process wrote
// stays as it was and the ProcessState's time stands.
func TestCPUTimeReadsTheProxysLineOnly(t *testing.T) {
	report := cpuReportPrefix + "2.5s" + cpuReportSuffix + "\n"
	for _, tc := range []struct {
		name, stderr, rest string
		used               time.Duration
	}{
		{"no report", "fatal error: out of memory\n", "fatal error: out of memory\n", 0},
		{"the report alone", report, "", 2500 * time.Millisecond},
		{"after the process's output", "a\nb\n" + report, "a\nb\n", 2500 * time.Millisecond},
		{"the last one counts", cpuReportPrefix + "9s" + cpuReportSuffix + "\n" + report, cpuReportPrefix + "9s" + cpuReportSuffix + "\n", 2500 * time.Millisecond},
		{"not at a line's start", "x" + report, "x" + report, 0},
		{"not a duration", cpuReportPrefix + "lots" + cpuReportSuffix + "\n", cpuReportPrefix + "lots" + cpuReportSuffix + "\n", 0},
		{"no suffix", cpuReportPrefix + "2s\n", cpuReportPrefix + "2s\n", 0},
	} {
		used, rest := CPUTime(nil, tc.stderr)
		if used != tc.used || rest != tc.rest {
			t.Errorf("%s: CPUTime(%q) = %v, %q; want %v, %q", tc.name, tc.stderr, used, rest, tc.used, tc.rest)
		}
	}
}
