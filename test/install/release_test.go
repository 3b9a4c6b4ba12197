package install

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/discovery"

	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

// releaseDistEnv names a directory `make release` wrote. Given, the suite
// installs that release as a platform team would from its registry: it
// publishes it (`make publish`) to a registry served on loopback by this
// process, installs the chart from there (helm install oci://…) and the
// real node's containerd pulls the image from there (nothing imported).
// make test-ci runs the lowest minor's install suite so. Without it the
// chart is charts/gatehouse and the image the imported archive (make
// test).
const releaseDistEnv = "GATEHOUSE_RELEASE_DIST"

// publishedRelease is where the suite published the release it installs.
type publishedRelease struct {
	version     string // the chart's version and the image's tag
	chart       string // oci://HOST:PORT/gatehouse-dev/charts/gatehouse
	repository  string // HOST:PORT/gatehouse-dev/gatehouse
	imageDigest string // the image index's digest, as the registry serves it
	server      *http.Server
}

// published is the release installed, nil when the suite installs from
// the repository.
var published *publishedRelease

// The previous chart: charts/gatehouse as of commit 4f63b87 (2026-12-02),
// packaged by helm as it was (testdata). The install suite installs it
// first and upgrades to today's chart with --reuse-values, as the docs'
// upgrade commands do: the new templates then render over the values of a
// chart that lacked every key added since (defaultsRevision,
// webhooks.matchConditions, the ServiceMonitor's authorization, the prune
// opt-outs, the sandbox runner's GOMEMLIMIT). Both charts run the image
// under test (their appVersion is the same): the previous release's image
// would need the previous commit's tree, which a clone need not hold, and
// it is the chart that --reuse-values breaks. Move it forward to the last
// release once the project has one.
const (
	previousChartFile    = "test/install/testdata/gatehouse-0.0.0-previous.4f63b87.tgz"
	previousChartVersion = "0.0.0-previous.4f63b87"
)

// previousChartLowestMinor is the lowest Kubernetes minor the previous
// chart's kubeVersion accepts (">=1.34.0-0").
const previousChartLowestMinor = 34

// firstChart is the chart the install suite installs first, in helm's
// command line, and its version: the previous chart (the packaged file, or
// the copy the suite pushed beside the release); on a minor the previous
// chart refuses, on which no release of it can have been installed, this
// chart, and the upgrade is to itself.
func firstChart(t *testing.T) (ref []string, version string) {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(controlPlane.Config)
	if err != nil {
		t.Fatal(err)
	}
	v, err := dc.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	minor, err := strconv.Atoi(strings.TrimSuffix(v.Minor, "+"))
	if err != nil {
		t.Fatalf("Kubernetes minor %q: %v", v.Minor, err)
	}
	if minor < previousChartLowestMinor {
		t.Logf("Kubernetes %s: older than the previous chart supports; installing this chart first", v.GitVersion)
		return chartRef(), currentChartVersion(t)
	}
	if published == nil {
		return []string{previousChartFile}, previousChartVersion
	}
	return []string{published.chart, "--version", previousChartVersion, "--plain-http"}, previousChartVersion
}

// chartRef is the chart in helm's command line.
func chartRef() []string {
	if published == nil {
		return []string{"charts/gatehouse"}
	}
	return []string{published.chart, "--version", published.version, "--plain-http"}
}

// helmChart is a helm command line (install, upgrade, template) of
// release rel from the suite's chart, then args.
func helmChart(verb, rel string, args ...string) []string {
	return append(append([]string{verb, rel}, chartRef()...), args...)
}

// imagePullPolicy is what the suite's own Pods of the Gatehouse image
// use: the imported image is never pulled; the published one is pulled
// once.
func imagePullPolicy() corev1.PullPolicy {
	if published == nil {
		return corev1.PullNever
	}
	return corev1.PullIfNotPresent
}

// releaseVersion is the version of the release in dist: the one chart
// make release packages.
func releaseVersion(dist string) (string, error) {
	charts, err := filepath.Glob(filepath.Join(dist, "gatehouse-*.tgz"))
	if err != nil {
		return "", err
	}
	if len(charts) != 1 {
		return "", fmt.Errorf("%s holds %d charts (gatehouse-*.tgz): not one release made by make release", dist, len(charts))
	}
	return strings.TrimSuffix(strings.TrimPrefix(filepath.Base(charts[0]), "gatehouse-"), ".tgz"), nil
}

// publishRelease serves a registry on loopback and publishes the release
// in dist to it with make publish, as docs/releasing.md has a user do.
func publishRelease(dist string) (*publishedRelease, error) {
	version, err := releaseVersion(dist)
	if err != nil {
		return nil, err
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{
		Handler:           registry.New(registry.Logger(log.New(io.Discard, "", 0))),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = srv.Serve(ln) }()
	host := ln.Addr().String()
	p := &publishedRelease{
		version:    version,
		chart:      "oci://" + host + "/gatehouse-dev/charts/gatehouse",
		repository: host + "/gatehouse-dev/gatehouse",
		server:     srv,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "publish",
		"DIST="+dist, "VERSION=v"+version, "REGISTRY="+host+"/gatehouse-dev")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	fmt.Fprintf(os.Stderr, "install: make publish to the loopback registry %s:\n%s", host, out)
	if err != nil {
		_ = srv.Close()
		return nil, fmt.Errorf("make publish: %w", err)
	}
	if p.imageDigest, err = verifyPublished(p, root, dist); err != nil {
		_ = srv.Close()
		return nil, err
	}
	// The previous chart beside it, as a registry keeps a project's
	// earlier releases.
	push := exec.CommandContext(ctx, filepath.Join(root, "bin", "helm"), "push", filepath.Join(root, previousChartFile),
		"oci://"+host+"/gatehouse-dev/charts", "--plain-http")
	push.Env = append(os.Environ(), "HELM_REGISTRY_CONFIG="+filepath.Join(os.TempDir(), fmt.Sprintf("gatehouse-install-registry-%d.json", os.Getpid())))
	if out, err := push.CombinedOutput(); err != nil {
		_ = srv.Close()
		return nil, fmt.Errorf("helm push %s: %w\n%s", previousChartFile, err, out)
	}
	return p, nil
}

// verifyPublished checks, as a user would before installing, that the
// image in the registry is signed by the release's key and carries its
// provenance naming the commit the release was built from, and returns
// the image's digest.
func verifyPublished(p *publishedRelease, root, dist string) (string, error) {
	cosign := filepath.Join(root, "bin", "cosign")
	home, err := os.MkdirTemp("", "gatehouse-cosign-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(home)
	run := func(args ...string) (string, error) {
		cmd := exec.Command(cosign, args...)
		cmd.Env = append(os.Environ(), "HOME="+home, "TUF_ROOT="+filepath.Join(home, "tuf"))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("cosign %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return string(out), nil
	}
	image := p.repository + ":" + p.version
	flags := []string{"--key", filepath.Join(dist, "cosign.pub"), "--insecure-ignore-tlog", "--allow-http-registry", "--allow-insecure-registry"}
	if _, err := run(append(append([]string{"verify"}, flags...), image)...); err != nil {
		return "", err
	}
	out, err := run(append(append([]string{"verify-attestation", "--type", "slsaprovenance1"}, flags...), image)...)
	if err != nil {
		return "", err
	}
	var env struct {
		Payload string `json:"payload"`
	}
	if err := json.Unmarshal([]byte(strings.SplitN(strings.TrimSpace(out), "\n", 2)[0]), &env); err != nil {
		return "", fmt.Errorf("cosign verify-attestation printed no envelope: %w", err)
	}
	raw, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		return "", err
	}
	var st struct {
		Subject []struct {
			Digest map[string]string `json:"digest"`
		} `json:"subject"`
		Predicate struct {
			BuildDefinition struct {
				ExternalParameters struct {
					Version string `json:"version"`
					Source  struct {
						Revision string `json:"revision"`
					} `json:"source"`
				} `json:"externalParameters"`
			} `json:"buildDefinition"`
		} `json:"predicate"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return "", err
	}
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		return "", err
	}
	params := st.Predicate.BuildDefinition.ExternalParameters
	if params.Source.Revision != strings.TrimSpace(string(head)) || params.Version != "v"+p.version {
		return "", fmt.Errorf("the image's provenance says %s at %s, the checkout is %s", params.Version, params.Source.Revision, head)
	}
	if len(st.Subject) != 1 || st.Subject[0].Digest["sha256"] == "" {
		return "", errors.New("the provenance attestation names no image digest")
	}
	return "sha256:" + st.Subject[0].Digest["sha256"], nil
}
