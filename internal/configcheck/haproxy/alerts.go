package haproxy

import (
	"crypto/sha256"
	"regexp"
	"strings"
)

// MaxAlerts bounds how many alerts of one run a verdict keeps (Alerts).
// The bound is a count, never a length of text: a failure is compared with
// another alert by alert (whether a change adds one), and an alert cut
// short or left out of a text bound could hide the one a change adds.
// haproxy's output is kept up to 1 MiB (maxOutput), so at about 100 bytes
// an alert a run says at most some ten thousand of them.
const MaxAlerts = 10000

// AlertKey identifies an alert for comparison: the alert's text without the
// line numbers it names, hashed. An object added above a broken line moves
// it, so two renderings failing the same way name other lines; the hash
// keeps a verdict's memory to 16 bytes an alert however long the alert
// (a backend name of 1,500 characters is quoted twice in a duplicate name
// alert).
type AlertKey [16]byte

// Alerts are the alerts of one haproxy -c run, every one up to MaxAlerts.
type Alerts struct {
	// Keys are the alerts' keys, in haproxy's order, repeats kept: three
	// backends of one name are two alerts alike.
	Keys []AlertKey
	// LeftOut counts the alerts beyond MaxAlerts; Truncated is true when
	// haproxy said more than maxOutput bytes, so alerts may be missing
	// that no count says. Either makes the list incomplete.
	LeftOut   int
	Truncated bool
}

// Complete says whether Keys hold every alert haproxy said.
func (a Alerts) Complete() bool { return a.LeftOut == 0 && !a.Truncated }

var (
	// alertLineRef matches a file line reference such as haproxy.cfg:12 or
	// maps/hosts.map:3; alertQuotedLine matches "line 12".
	alertLineRef    = regexp.MustCompile(`(\.(?:cfg|map|pem|lst|txt|http|crt|key)):\d+`)
	alertQuotedLine = regexp.MustCompile(`\bline \d+\b`)
)

// ParseAlerts reads every [ALERT] of haproxy's output (prefix and PID
// removed, continuation lines joined, the closing summaries left out) into
// keys. Unlike Simplify, which writes a message a person reads and is
// bounded in bytes, nothing here is cut: every alert counts, up to
// MaxAlerts.
func ParseAlerts(output string) Alerts {
	var a Alerts
	output = strings.ReplaceAll(output, "\r\n", "\n")
	if strings.HasSuffix(output, outputTruncated) {
		a.Truncated = true
	}
	output = tempDirSlash.ReplaceAllString(output, "")
	output = tempDir.ReplaceAllString(output, ".")
	lines := strings.Split(output, "\n")
	for i := 0; i < len(lines); i++ {
		level, text, ok := parseLine(lines[i])
		if !ok || level != "ALERT" || isSummary(text) {
			continue
		}
		var b strings.Builder
		b.WriteString(text)
		for i+1 < len(lines) && isContinuation(lines[i+1]) {
			i++
			b.WriteString("\n")
			b.WriteString(strings.TrimSpace(lines[i]))
		}
		if len(a.Keys) == MaxAlerts {
			a.LeftOut++
			continue
		}
		a.Keys = append(a.Keys, KeyOf(b.String()))
	}
	return a
}

// KeyOf is the key of one alert's text (or of any failure message).
func KeyOf(text string) AlertKey {
	text = alertQuotedLine.ReplaceAllString(alertLineRef.ReplaceAllString(text, "$1:N"), "line N")
	sum := sha256.Sum256([]byte(text))
	var k AlertKey
	copy(k[:], sum[:])
	return k
}

// Within says whether every alert of a is among b's, as many times as it
// is there (a multiset): a adds no alert to b. Both must be complete: an
// alert left out of either may be the one a adds.
func (a Alerts) Within(b Alerts) bool {
	if !a.Complete() || !b.Complete() {
		return false
	}
	have := make(map[AlertKey]int, len(b.Keys))
	for _, k := range b.Keys {
		have[k]++
	}
	for _, k := range a.Keys {
		if have[k] == 0 {
			return false
		}
		have[k]--
	}
	return true
}

// Fewer says whether a is within b and has fewer alerts: a fixes some of
// b's failure and adds none.
func (a Alerts) Fewer(b Alerts) bool {
	return a.Within(b) && len(a.Keys) < len(b.Keys)
}
