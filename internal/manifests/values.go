package manifests

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// chartValuesFile is the chart's values.yaml, written by hand but for its
// defaultsRevision line, which make generate keeps.
const chartValuesFile = "charts/gatehouse/values.yaml"

// defaultsRevisionLine is values.yaml's defaultsRevision.
var defaultsRevisionLine = regexp.MustCompile(`(?m)^defaultsRevision: .*$`)

// chartValues is values.yaml with its defaultsRevision set to the
// revision of its keys. The templates fill in the defaults a release's
// values lack only when its revision is another (an upgrade with
// --reuse-values from an older chart), so that a key a user deleted with
// null stays deleted otherwise.
func chartValues(root string) ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(root, chartValuesFile))
	if err != nil {
		return nil, err
	}
	if !defaultsRevisionLine.Match(data) {
		return nil, fmt.Errorf("%s has no top-level defaultsRevision line", chartValuesFile)
	}
	revision, err := DefaultsRevision(data)
	if err != nil {
		return nil, err
	}
	return defaultsRevisionLine.ReplaceAll(data, []byte(fmt.Sprintf("defaultsRevision: %q", revision))), nil
}

// DefaultsRevision names the set of keys of a values file: the first 12
// hexadecimal digits of the SHA-256 of their sorted dotted paths, maps
// followed to every depth, defaultsRevision left out. It changes when a
// key is added, removed or renamed, not when a default value does.
func DefaultsRevision(values []byte) (string, error) {
	var tree map[string]any
	if err := yaml.Unmarshal(values, &tree); err != nil {
		return "", err
	}
	delete(tree, "defaultsRevision")
	var paths []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			paths = append(paths, prefix+k)
			if sub, ok := v.(map[string]any); ok {
				walk(prefix+k+".", sub)
			}
		}
	}
	walk("", tree)
	slices.Sort(paths)
	sum := sha256.Sum256([]byte(strings.Join(paths, "\n")))
	return hex.EncodeToString(sum[:])[:12], nil
}
