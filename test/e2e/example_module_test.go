package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/metrics"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/policytest"
)

// This file is the worked example of docs/architecture.md, "Adding a
// module", followed step by step: ownerlabel is not shipped. The Go blocks
// of that section are copied from here, and
// TestArchitectureExampleIsThisFile keeps them so.

// Step 1: the module, its name and its types.

// ownerLabel refuses ConfigMaps without an owner label in namespaces that
// ask for one (labelled example.gatehouse.dev/require-owner=true).
type ownerLabel struct {
	namespaces client.Reader // the module's cache: decisions read it
	live       client.Reader // the API server: only to confirm a denial
	settings   ownerLabelSettings
}

const (
	requireOwnerLabel = "example.gatehouse.dev/require-owner"
	ownerLabelKey     = "example.gatehouse.dev/owner"
	reasonNoOwner     = "owner-missing"
)

func (*ownerLabel) Name() string                      { return "ownerlabel" }
func (*ownerLabel) AddToScheme(*runtime.Scheme) error { return nil } // built-in kinds only

// Step 2: declare the webhook.

func (m *ownerLabel) Webhooks() []module.Webhook {
	return []module.Webhook{{
		Name: "ownerlabel.gatehouse.dev", Path: "/validate-ownerlabel", Type: module.Validating,
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
		}},
		FailurePolicy:  admissionregistrationv1.Ignore, // a missing label loses no data
		SideEffects:    admissionregistrationv1.SideEffectClassNone,
		TimeoutSeconds: 5,
		Admit: func(ctx context.Context, req admission.Request) admission.Response {
			return m.decide(ctx, m.namespaces, req)
		},
		Confirm: &module.Confirmation{Decide: func(ctx context.Context, req admission.Request, _ admission.Response) module.Confirmed {
			return module.LiveDecision(m.decide(ctx, m.live, req))
		}},
		DenialReasons: []string{reasonNoOwner},
	}}
}

// Step 3: ask the host for what the decision reads.

func (m *ownerLabel) Setup(_ context.Context, host module.Host) error {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	c, err := host.NewCache("namespaces", cache.Options{ByObject: map[client.Object]cache.ByObject{ns: {}}})
	if err != nil {
		return err
	}
	m.namespaces, m.live = c, host.APIReader()
	return nil
}

// Step 4: its settings.

// ownerLabelSettings are modules.ownerlabel.settings of the --config file
// (and of the chart's values): the host decodes them strictly, then the
// module's flags given on the command line.
type ownerLabelSettings struct {
	// Key is the label that names a ConfigMap's owner.
	Key string `json:"key,omitempty"`
}

func newOwnerLabel() *ownerLabel {
	return &ownerLabel{settings: ownerLabelSettings{Key: ownerLabelKey}} // the defaults, set once
}

func (m *ownerLabel) Settings() any { return &m.settings }

func (m *ownerLabel) Flags(fs *module.FlagSet) {
	fs.StringVar(&m.settings.Key, "ownerlabel-key", m.settings.Key, "Label naming a ConfigMap's owner.")
}

// Step 5: decide, over whichever reader it is given.

func (m *ownerLabel) decide(ctx context.Context, r client.Reader, req admission.Request) admission.Response {
	var obj metav1.PartialObjectMetadata
	if err := jsonUnmarshal(req.Object.Raw, &obj); err != nil {
		return admission.Errored(400, err)
	}
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := r.Get(ctx, client.ObjectKey{Name: req.Namespace}, ns); err != nil {
		return admission.Errored(500, fmt.Errorf("namespace %s: %w", req.Namespace, err))
	}
	key := m.settings.Key
	if ns.Labels[requireOwnerLabel] != "true" || obj.Labels[key] != "" {
		return admission.Allowed("")
	}
	return module.Deny(reasonNoOwner, fmt.Sprintf("ConfigMap %s/%s has no %s label, which namespace %s requires (%s=true).\nAdd the label naming its owner, e.g. %s=team-a.",
		req.Namespace, obj.Name, key, req.Namespace, requireOwnerLabel, key))
}

// Step 6: an offline check of a file, for a repository's CI.

func (m *ownerLabel) OfflineCheck() module.OfflineCheck {
	return module.OfflineCheck{Kind: "ConfigMap", Run: m.checkFile}
}

func (m *ownerLabel) checkFile(_ context.Context, data []byte, _ module.OfflineRequest) ([]module.OfflineResult, error) {
	var obj metav1.PartialObjectMetadata
	if err := yaml.UnmarshalStrict(data, &obj); err != nil {
		return nil, err
	}
	result := module.OfflineResult{Name: "owner label", Passed: obj.Labels[m.settings.Key] != ""}
	if !result.Passed {
		result.Failures = []string{fmt.Sprintf("ConfigMap %s has no %s label", obj.Name, m.settings.Key)}
	}
	return []module.OfflineResult{result}, nil
}

// Step 7: enable it with a setting, and test it through kube-apiserver as
// a tenant.

func TestExampleModuleFromTheArchitectureGuide(t *testing.T) {
	const teamKey = "example.gatehouse.dev/team" // the setting, over the default owner label
	startGatehouse(t, app.Options{
		Catalogue: []module.Module{newOwnerLabel()},
		Modules: map[string]app.ModuleConfig{"ownerlabel": {Enabled: true,
			Settings: json.RawMessage(`{"key": "` + teamKey + `"}`)}},
	})
	ctx := context.Background()
	strict := namespace(t, "owners")
	lax := namespace(t, "owners-lax")
	var ns corev1.Namespace
	if err := controlPlane.Client.Get(ctx, client.ObjectKey{Name: strict}, &ns); err != nil {
		t.Fatal(err)
	}
	ns.Labels[requireOwnerLabel] = "true"
	if err := controlPlane.Client.Update(ctx, &ns); err != nil {
		t.Fatal(err)
	}
	tenant := "tenant-" + randSuffix()
	for _, n := range []string{strict, lax} {
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "edit", Namespace: n},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: tenant}}}
		if err := controlPlane.Client.Create(ctx, rb); err != nil {
			t.Fatal(err)
		}
	}
	as := impersonated(t, tenant)
	create := func(namespace string, labels map[string]string) error {
		return as.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "cm-", Namespace: namespace, Labels: labels}})
	}

	// The namespace's label reaches the cache a moment after the update;
	// until then a ConfigMap is admitted, which is the module's answer
	// too, so wait for the first denial.
	var err error
	eventually(t, "the first denial", func() error {
		if err = create(strict, nil); err == nil {
			return errors.New("admitted")
		}
		return nil
	})
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Code != 403 ||
		!strings.Contains(err.Error(), `admission webhook "ownerlabel.gatehouse.dev" denied the request`) ||
		!strings.Contains(err.Error(), "has no example.gatehouse.dev/team label") ||
		!strings.Contains(err.Error(), "Add the label naming its owner") {
		t.Fatalf("unlabelled ConfigMap in %s: %v; want the module's denial, with how to proceed", strict, err)
	}
	if err := create(strict, map[string]string{teamKey: "team-a"}); err != nil {
		t.Fatalf("labelled ConfigMap refused: %v", err)
	}
	if err := create(lax, nil); err != nil {
		t.Fatalf("a namespace that does not ask for owners refused a ConfigMap: %v", err)
	}
	// The denial was counted under the declared reason.
	if got := testutil.ToFloat64(metrics.Denials.WithLabelValues("ownerlabel.gatehouse.dev", "ownerlabel", reasonNoOwner, "denied")); got < 1 {
		t.Errorf("denials by reason = %v; want at least 1", got)
	}
}

// TestExampleModuleOfflineCheck: `gatehouse test` runs the module's
// offline check on a file of its kind, with the module's settings, and
// neither it nor cmd names the module: the catalogue hands it over.
func TestExampleModuleOfflineCheck(t *testing.T) {
	m := newOwnerLabel()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	_, _, checks := policytest.AddFlags(fs, []module.Module{m})
	opts := policytest.Options{Checks: checks}
	for _, tc := range []struct {
		file   string
		passed bool
	}{
		{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: owned, labels: {example.gatehouse.dev/owner: team-a}}\n", true},
		{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: orphan}\n", false},
	} {
		r := policytest.RunFile(context.Background(), "cm.yaml", []byte(tc.file), opts)
		if r.Err != nil || len(r.Results) != 1 || r.Results[0].Passed != tc.passed || r.Results[0].Name != "cm.yaml: owner label" {
			t.Errorf("%s: %+v; want one result, passed %v", tc.file, r, tc.passed)
		}
	}
	// A file of another kind is a suite: this one is an invalid one.
	if r := policytest.RunFile(context.Background(), "x.yaml", []byte("kind: Secret\n"), opts); r.Err == nil {
		t.Errorf("a Secret ran as %+v; want it read as an invalid suite", r)
	}
}

// TestArchitectureExampleIsThisFile: every Go block of the guide's worked
// example is in this file, so the guide shows code that runs.
func TestArchitectureExampleIsThisFile(t *testing.T) {
	doc, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile("example_module_test.go")
	if err != nil {
		t.Fatal(err)
	}
	section := string(doc)
	i := strings.Index(section, "## Adding a module")
	if i < 0 {
		t.Fatal(`docs/architecture.md has no "## Adding a module" section`)
	}
	section = section[i:]
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(section, -1)
	if len(blocks) < 4 {
		t.Fatalf("the guide's example has %d Go blocks; want the module's steps", len(blocks))
	}
	for _, b := range blocks {
		if !strings.Contains(string(self), b[1]) {
			t.Errorf("docs/architecture.md shows code that is not in the tested example:\n%s", b[1])
		}
	}
}

// TestArchitectureMapsEveryPackage: the layer map of docs/architecture.md
// names every package of the binary and of hack/ (test scaffolding under
// internal/testing/..., the API types under api/ and the tools' own
// modules under hack/tools are named as a whole),
// so that a package carved out or added is placed on the map with it.
func TestArchitectureMapsEveryPackage(t *testing.T) {
	doc, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	layers := string(doc)
	i := strings.Index(layers, "## Layers")
	j := strings.Index(layers, "## A module declares")
	if i < 0 || j < i {
		t.Fatal(`docs/architecture.md has no "## Layers" section before "## A module declares"`)
	}
	layers = layers[i:j]
	named := map[string]bool{}
	for _, word := range regexp.MustCompile(`(?:cmd|internal|hack)/[A-Za-z0-9_./]*[A-Za-z0-9_]`).FindAllString(layers, -1) {
		named[word] = true
	}
	var missing []string
	for _, root := range []string{"cmd", "internal", "hack"} {
		err := filepath.WalkDir(filepath.Join("../..", root), func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel("../..", path)
			rel = filepath.ToSlash(rel)
			if rel == "internal/testing" || strings.HasPrefix(rel, "internal/testing/") || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // a module of its own (hack/tools' pins)
			}
			sources, _ := filepath.Glob(filepath.Join(path, "*.go"))
			for _, s := range sources {
				if !strings.HasSuffix(s, "_test.go") {
					if !named[rel] {
						missing = append(missing, rel)
					}
					break
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(layers, "internal/testing/...") || !strings.Contains(layers, "api/<group>/<version>") {
		t.Error("the map no longer names internal/testing/... and api/<group>/<version> as a whole")
	}
	if len(missing) > 0 {
		t.Errorf("docs/architecture.md's layer map does not name %s", strings.Join(missing, ", "))
	}
}
