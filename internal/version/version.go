// Package version says which Gatehouse this is: the release version (set at
// link time by `make build` and the image build) and the source revision
// and Go version the binary was built from (recorded by the Go toolchain).
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the release version, set with
// -ldflags "-X github.com/gatehouse-dev/gatehouse/internal/version.Version=v0.2.0".
// Without it, the module version Go recorded, else "dev".
var Version = ""

// Info is what a build says of itself.
type Info struct {
	Version, Revision, GoVersion string
	// Modified is true when the work tree had uncommitted changes.
	Modified bool
}

// Get returns this binary's Info.
func Get() Info {
	info := Info{Version: Version, Revision: "unknown", GoVersion: runtime.Version()}
	build, ok := debug.ReadBuildInfo()
	if !ok {
		if info.Version == "" {
			info.Version = "dev"
		}
		return info
	}
	if info.Version == "" {
		info.Version = build.Main.Version
		if info.Version == "" || info.Version == "(devel)" {
			info.Version = "dev"
		}
	}
	for _, s := range build.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}

// String is the one line `gatehouse --version` prints.
func (i Info) String() string {
	rev := i.Revision
	if i.Modified {
		rev += "-dirty"
	}
	return fmt.Sprintf("%s (revision %s, %s)", i.Version, rev, i.GoVersion)
}
