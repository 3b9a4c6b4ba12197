// Package testlog is a logger for tests that assert what was logged: it
// keeps every line and passes it on to the test's own log.
package testlog

import (
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// Lines keeps the lines its loggers wrote, one formatted line each
// (`<name> "level"=0 "msg"="..." "key"="value" ...`). The zero value is
// ready to use.
type Lines struct {
	mu    sync.Mutex
	lines []string
}

// Logger is a logger writing to l and to t's log.
func (l *Lines) Logger(t testing.TB) logr.Logger {
	return funcr.New(func(prefix, args string) {
		line := prefix + " " + args
		t.Log(line)
		l.mu.Lock()
		l.lines = append(l.lines, line)
		l.mu.Unlock()
	}, funcr.Options{})
}

// Matching returns the lines holding every part.
func (l *Lines) Matching(parts ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			out = append(out, line)
		}
	}
	return out
}

// Has says whether a line holds every part.
func (l *Lines) Has(parts ...string) bool { return len(l.Matching(parts...)) > 0 }
