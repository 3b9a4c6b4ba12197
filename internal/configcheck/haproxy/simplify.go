package haproxy

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/gatehouse-dev/gatehouse/internal/textcut"
)

const (
	// maxMessage bounds Simplify's result, in bytes.
	maxMessage = 4096
	// maxQuoted bounds one quoted configuration line, in bytes.
	maxQuoted = 200
	// maxRefs bounds how many configuration lines one alert quotes.
	maxRefs = 3
)

var (
	// logPrefix matches haproxy's message prefix: the level, then the
	// "DDD/HHMMSS" date of old versions and the "(PID)" of every version,
	// then " : ". 2.6 writes "[ALERT]    (12345) : config : ...".
	logPrefix = regexp.MustCompile(`^\[(ALERT|WARNING|NOTICE|DIAG|INFO|DEBUG)\]\s*(?:\d+/\d+\s*)?(?:\(\d+\)\s*)?:\s*`)
	// configRef matches a reference to a line of haproxy.cfg, as in
	// "[haproxy.cfg:12]" or "declared at haproxy.cfg:12".
	configRef = regexp.MustCompile(`\bhaproxy\.cfg:(\d+)`)
	// tempDirSlash and tempDir match a run's private directory, as an
	// absolute path, should haproxy ever print one.
	tempDirSlash = regexp.MustCompile(`(?:/[^/\s'"<>\[\]():]+)*/gatehouse-haproxy-[0-9A-Za-z_-]*/`)
	tempDir      = regexp.MustCompile(`(?:/[^/\s'"<>\[\]():]+)*/gatehouse-haproxy-[0-9A-Za-z_-]*`)
)

// Simplify turns the output of haproxy -c into a denial message: the
// [ALERT] lines without their PID (or date) prefix and without the closing
// summaries ("Error(s) found in configuration file", "Fatal errors found in
// configuration."), each followed by the configuration lines it cites,
// quoted from config:
//
//	[ALERT] config : parsing [haproxy.cfg:10] : unknown keyword 'foo' in 'frontend' section
//	  line 10: foo bar
//
// Several alerts are separated by newlines; the result is at most about
// 4 KB and says how many alerts were left out. Temporary paths are removed.
// When there is no [ALERT] line, the output is returned trimmed (and
// bounded), with prefixes shortened the same way and haproxy's version
// notices dropped.
func Simplify(output, config string) string {
	output = strings.ReplaceAll(output, "\r\n", "\n")
	output = tempDirSlash.ReplaceAllString(output, "")
	output = tempDir.ReplaceAllString(output, ".")
	lines := strings.Split(output, "\n")

	var alerts []string
	for i := 0; i < len(lines); i++ {
		level, text, ok := parseLine(lines[i])
		if !ok || level != "ALERT" || isSummary(text) {
			continue
		}
		alert := "[ALERT] " + text
		// Indented lines that follow belong to the same message.
		for i+1 < len(lines) && isContinuation(lines[i+1]) {
			i++
			alert += "\n  " + strings.TrimSpace(lines[i])
		}
		alerts = append(alerts, alert)
	}
	if len(alerts) == 0 {
		return bound(withoutAlerts(lines, output), maxMessage)
	}

	configLines := strings.Split(config, "\n")
	// Room is kept for the note on alerts left out.
	const room = maxMessage - 64
	var b strings.Builder
	for i, alert := range alerts {
		block := alert + quote(alert, configLines)
		sep := ""
		if i > 0 {
			sep = "\n"
		}
		if b.Len()+len(sep)+len(block) > room {
			if i == 0 {
				b.WriteString(bound(block, room))
				if len(alerts) > 1 {
					fmt.Fprintf(&b, "\n(%d more alerts not shown)", len(alerts)-1)
				}
				break
			}
			fmt.Fprintf(&b, "\n(%d more alerts not shown)", len(alerts)-i)
			break
		}
		b.WriteString(sep)
		b.WriteString(block)
	}
	return b.String()
}

// parseLine splits a haproxy message line into its level and its text
// after the prefix.
func parseLine(line string) (level, text string, ok bool) {
	m := logPrefix.FindStringSubmatchIndex(line)
	if m == nil {
		return "", "", false
	}
	return line[m[2]:m[3]], strings.TrimRight(line[m[1]:], " \t"), true
}

func isSummary(text string) bool {
	lower := strings.ToLower(text)
	return strings.Contains(lower, "fatal errors found in configuration") ||
		strings.Contains(lower, "error(s) found in configuration file")
}

func isContinuation(line string) bool {
	return strings.TrimSpace(line) != "" && (line[0] == ' ' || line[0] == '\t')
}

// quote returns the configuration lines an alert cites, one per line.
func quote(alert string, configLines []string) string {
	var b strings.Builder
	seen := map[int]bool{}
	for _, m := range configRef.FindAllStringSubmatch(alert, -1) {
		n, err := strconv.Atoi(m[1])
		if err != nil || n < 1 || n > len(configLines) || seen[n] {
			continue
		}
		if len(seen) == maxRefs {
			break
		}
		seen[n] = true
		fmt.Fprintf(&b, "\n  line %d: %s", n, bound(strings.TrimSpace(configLines[n-1]), maxQuoted))
	}
	return b.String()
}

// withoutAlerts is the output when it has no alert: message prefixes
// shortened, empty lines and haproxy's version notices dropped.
func withoutAlerts(lines []string, output string) string {
	var kept []string
	for _, line := range lines {
		if strings.TrimSpace(line) == "" {
			continue
		}
		if level, text, ok := parseLine(line); ok {
			if level == "NOTICE" && (strings.HasPrefix(text, "haproxy version is") || strings.HasPrefix(text, "path to executable is")) {
				continue
			}
			line = "[" + level + "] " + text
		}
		kept = append(kept, strings.TrimRight(line, " \t"))
	}
	if len(kept) == 0 {
		return strings.TrimSpace(output)
	}
	return strings.TrimSpace(strings.Join(kept, "\n"))
}

// bound cuts s to at most n bytes, on a character boundary, marking the cut.
func bound(s string, n int) string { return textcut.Bound(s, n, " …") }
