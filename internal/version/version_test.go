package version

import (
	"runtime"
	"strings"
	"testing"
)

func TestGetPrefersTheLinkedVersion(t *testing.T) {
	old := Version
	t.Cleanup(func() { Version = old })
	Version = "v9.8.7"
	got := Get()
	if got.Version != "v9.8.7" || got.GoVersion != runtime.Version() {
		t.Fatalf("Get() = %+v, want version v9.8.7 and %s", got, runtime.Version())
	}
	if s := got.String(); !strings.HasPrefix(s, "v9.8.7 (revision ") || !strings.Contains(s, runtime.Version()) {
		t.Fatalf("String() = %q", s)
	}
	Version = ""
	if v := Get().Version; v == "" {
		t.Fatal("without a linked version, Get() says nothing")
	}
}
