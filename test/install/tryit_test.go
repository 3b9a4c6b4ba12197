package install

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

// tryItHeading is the README section a newcomer copies from.
const tryItHeading = "## Try it on your cluster"

// readmeCommand is one command line of the README's blocks: its words,
// and what its comment says of it.
type readmeCommand struct {
	line    string   // as written, continuation lines joined
	words   []string // split on blanks ($REGISTRY left as is)
	refused bool     // its comment starts with "refused": the command must be denied
}

// tryItBlocks reads the README's "Try it on your cluster" section: its
// fenced sh blocks, in order, one command per line (a trailing "\"
// continues it), comments stripped.
func tryItBlocks(readme string) ([][]readmeCommand, error) {
	start := strings.Index(readme, "\n"+tryItHeading+"\n")
	if start < 0 {
		return nil, fmt.Errorf("README.md has no %q section", tryItHeading)
	}
	section := readme[start+len(tryItHeading)+2:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var (
		blocks  [][]readmeCommand
		current []readmeCommand
		inBlock bool
		pending string
	)
	sc := bufio.NewScanner(strings.NewReader(section))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case !inBlock && line == "```sh":
			inBlock, current = true, nil
			continue
		case inBlock && line == "```":
			if pending != "" {
				return nil, fmt.Errorf("README.md's %q: a block ends in a continued line: %q", tryItHeading, pending)
			}
			blocks = append(blocks, current)
			inBlock = false
			continue
		case !inBlock:
			continue
		}
		if cont, ok := strings.CutSuffix(strings.TrimRight(line, " "), "\\"); ok {
			pending += cont + " "
			continue
		}
		line, pending = pending+line, ""
		cmd, comment, _ := strings.Cut(line, " #")
		cmd = strings.TrimSpace(cmd)
		if cmd == "" {
			continue
		}
		current = append(current, readmeCommand{
			line:    strings.Join(strings.Fields(cmd), " "),
			words:   strings.Fields(cmd),
			refused: strings.HasPrefix(strings.TrimSpace(comment), "refused"),
		})
	}
	if inBlock {
		return nil, fmt.Errorf("README.md's %q: a block is not closed", tryItHeading)
	}
	if len(blocks) != 2 {
		return nil, fmt.Errorf("README.md's %q has %d sh blocks; want 2 (try, clean up)", tryItHeading, len(blocks))
	}
	return blocks, nil
}

// TestTryItOnYourCluster runs the README's "Try it on your cluster" as
// written, on the real node: its helm and kubectl lines one by one (the
// one its comment says is refused must be denied by pvsafe, every other
// must succeed), then its clean-up block, which must leave nothing of
// Gatehouse or the demo behind. With GATEHOUSE_RELEASE_DIST (make
// test-ci) the chart and image come from the registry on loopback the
// suite published that release to with make publish, REGISTRY naming it,
// as in the README; the README's make release and make publish lines are
// then the very commands make test-release and the suite's set-up ran
// (their VERSION must be the release's). Without it (make test) the chart
// is the checkout's and the image the imported one: the registry's chart
// reference and image repository are the only words replaced. Either way
// the real node's scheduling (its label and taint) is added to the helm
// install, which nothing in a user's cluster needs.
func TestTryItOnYourCluster(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := tryItBlocks(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	appVersion := chartAppVersion(t, root)
	registry := "registry.example/platform"
	if published != nil {
		registry = strings.TrimSuffix(published.repository, "/gatehouse")
		if published.version != appVersion {
			t.Fatalf("the release installed is %s, not the chart's appVersion %s that the README and make release's default name", published.version, appVersion)
		}
	}
	scheduling := valuesFile(t, onRealNode())
	ran := map[string]bool{}
	run := func(c readmeCommand) {
		t.Helper()
		words := make([]string, 0, len(c.words))
		for _, w := range c.words {
			words = append(words, strings.ReplaceAll(w, "$REGISTRY", registry))
		}
		switch words[0] {
		case "export":
			if !strings.HasPrefix(c.line, "export REGISTRY=") {
				t.Fatalf("README line %q: the suite knows only REGISTRY", c.line)
			}
			return
		case "make":
			// make release and make publish: the release the suite
			// installs is theirs; the README must name its version.
			if len(words) < 2 || (words[1] != "release" && words[1] != "publish") {
				t.Fatalf("README line %q: want make release or make publish", c.line)
			}
			if !strings.Contains(c.line, " VERSION=v"+appVersion) {
				t.Errorf("README line %q does not build the chart's appVersion v%s (make release's default, the release CI builds)", c.line, appVersion)
			}
			if words[1] == "publish" && !strings.Contains(c.line, "REGISTRY=$REGISTRY") {
				t.Errorf("README line %q does not publish to $REGISTRY", c.line)
			}
			ran[words[1]] = true
			return
		case "bin/helm":
			words[0] = "helm"
			if words[1] == "install" {
				words = tryItInstall(t, c.line, words, registry, appVersion)
				words = append(words, "-f", scheduling)
				ran["install"] = true
			}
		case "kubectl":
		default:
			t.Fatalf("README line %q: the suite runs only make, bin/helm and kubectl lines", c.line)
		}
		out, err := tool(t, words[0], words[1:]...)
		if c.refused {
			if err == nil || !strings.Contains(out, "denied the request") || !strings.Contains(out, "DELETION BLOCKED") {
				t.Fatalf("README line %q, which says it is refused: %v: %s", c.line, err, out)
			}
			ran["refused"] = true
			return
		}
		if err != nil {
			t.Fatalf("README line %q: %v", c.line, err)
		}
	}
	t.Cleanup(func() {
		if _, err := tool(t, "helm", "status", release, "--namespace", releaseNamespace); err == nil {
			tool(t, "helm", "uninstall", release, "--namespace", releaseNamespace, "--wait", "--timeout", "5m")
		}
	})
	for _, c := range blocks[0] {
		run(c)
	}
	for _, want := range []string{"release", "publish", "install", "refused"} {
		if !ran[want] {
			t.Errorf("README's try block has no %s line", want)
		}
	}
	for _, c := range blocks[1] {
		run(c)
	}
	// The clean-up left nothing: no release, no demo.
	if out, err := tool(t, "helm", "status", release, "--namespace", releaseNamespace); err == nil {
		t.Errorf("the README's clean-up left the release installed:\n%s", out)
	}
	for _, what := range [][]string{{"namespace", "pvsafe-demo"}, {"pv", "pvsafe-demo-data"}} {
		poll(t, "the README's clean-up removes "+strings.Join(what, " "), 2*time.Minute, func() error {
			out, err := tool(t, "kubectl", "get", what[0], what[1], "--ignore-not-found", "-o", "name")
			if err != nil || strings.TrimSpace(out) != "" {
				return fmt.Errorf("still there (%v): %s", err, out)
			}
			return nil
		})
	}
}

// tryItInstall is the README's helm install as the suite runs it: from the
// published release as written (with --plain-http: the registry on
// loopback speaks HTTP), or, without one, with the registry's
// chart reference and image repository replaced by the checkout's chart
// and the chart's default image (the imported one).
func tryItInstall(t *testing.T, line string, words []string, registry, appVersion string) []string {
	t.Helper()
	chart := "oci://" + registry + "/charts/gatehouse"
	i := slices.Index(words, chart)
	if i < 0 || i+2 >= len(words) || words[i+1] != "--version" || words[i+2] != appVersion {
		t.Fatalf("README line %q: want the chart oci://$REGISTRY/charts/gatehouse --version %s", line, appVersion)
	}
	image := slices.Index(words, "image.repository="+registry+"/gatehouse")
	if image < 1 || words[image-1] != "--set" {
		t.Fatalf("README line %q: want --set image.repository=$REGISTRY/gatehouse", line)
	}
	if published != nil {
		return append(words[:len(words):len(words)], "--plain-http")
	}
	local := append([]string{}, words[:i]...)
	local = append(local, "charts/gatehouse")
	for j := i + 3; j < len(words); j++ {
		if j == image-1 || j == image {
			continue
		}
		local = append(local, words[j])
	}
	return local
}

// chartAppVersion is charts/gatehouse's appVersion: make release's default
// version, the one CI releases.
func chartAppVersion(t *testing.T, root string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "charts", "gatehouse", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(data, &meta); err != nil || meta.AppVersion == "" {
		t.Fatalf("charts/gatehouse/Chart.yaml: appVersion %q: %v", meta.AppVersion, err)
	}
	return meta.AppVersion
}
