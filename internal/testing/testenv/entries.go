package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	"github.com/gatehouse-dev/gatehouse/internal/sandbox"
)

// Every binary that links this package links controller-runtime's envtest,
// whose package init creates a cache directory ($XDG_CACHE_HOME, $HOME/.cache
// or, in the confined entries' empty environment, /tmp/kubebuilder-envtest).
// A confined entry cannot create it, and Go runs that init before the
// entry's own package init recognizes the entry, so such a binary cannot be
// its own render worker: the worker would panic before serving (on a machine
// where the directory does not exist yet). Its entries are served by the
// gatehouse binary instead, built from the same source: what production runs.
func init() { sandbox.ServeEntriesFrom(GatehouseForEntries) }

var entriesBinary = sync.OnceValues(buildEntriesBinary)

// GatehouseForEntries returns the path of a gatehouse binary built from this
// checkout's source, building it on the first call in this process (a
// link, seconds, once make build has compiled the packages).
func GatehouseForEntries() (string, error) { return entriesBinary() }

func buildEntriesBinary() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "bin", "entries")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Each process builds into a file of its own and renames it into
	// place: test binaries build at the same time, and one that already
	// executes the file keeps its inode.
	tmp, err := os.CreateTemp(dir, ".gatehouse-*")
	if err != nil {
		return "", err
	}
	_ = tmp.Close()
	defer os.Remove(tmp.Name())
	// go test puts its toolchain's bin first on the tests' PATH. The
	// configuration is make build's (static, -trimpath: the Makefile's
	// GO_STATIC), so this is a link of the packages it compiled.
	cmd := exec.Command("go", "build", "-trimpath", "-o", tmp.Name(), "./cmd/gatehouse")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building the gatehouse binary that serves confined entries: %w: %s", err, out.Bytes())
	}
	path := filepath.Join(dir, "gatehouse")
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", err
	}
	return path, nil
}
