package placement

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"
)

// Native fuzz targets for what tenants and their users write: the tenant's
// values.yaml and the HelmRelease the release webhook mutates. Run one with
//
//	go test ./internal/placement -run '^$' -fuzz '^FuzzParseTenant$' -fuzztime 30s
//
// or all of them with make fuzz. FuzzImpliesNodeAffinity is in
// affinity_test.go.

func tenantSeeds() []string {
	return []string{
		"",
		"host: example.org\n",
		"_namespace:\n  defaultAffinityClass: dc1\n",
		"_namespace:\n  defaultAffinityClass: dc1\n  allowedAffinityClasses: [gpu, dc1]\n",
		"_namespace:\n  allowedAffinityClasses: []\n",
		"_namespace:\n  allowedAffinityClasses: ['', ~, gpu]\n",
		"_namespace:\n  defaultAffinityClass: 12\n",
		"_namespace: [\n",
		"_namespace: null\n",
		"a: &a [*a]\n",
		`{"_namespace":{"defaultAffinityClass":"gpu","allowedAffinityClasses":["gpu"]}}`,
	}
}

// FuzzParseTenant: parseTenant never panics; no data is no tenant; an
// unreadable values.yaml is a tenant with only Err set; a readable one is
// no tenant or one with a default or an allow-list, sorted, whose every
// class it allows; and writing the tenant's settings back as values.yaml
// reads as the same tenant. (An empty class name in the allow-list is
// accepted as written: it is harmless, no release resolves to "".)
func FuzzParseTenant(f *testing.F) {
	for _, s := range tenantSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got := parseTenant("ns", data)
		if got == nil {
			return
		}
		if len(data) == 0 {
			t.Fatalf("a tenant from no data: %+v", got)
		}
		if got.Err != nil {
			if got.Default != "" || got.Allowed != nil {
				t.Fatalf("an unreadable values.yaml with settings: %+v", got)
			}
			if !strings.Contains(got.Err.Error(), "Secret ns/cozystack-values key values.yaml") {
				t.Fatalf("the error does not name the Secret: %v", got.Err)
			}
			return
		}
		if got.Default == "" && got.Allowed == nil {
			t.Fatalf("a tenant without settings: %+v", got)
		}
		if !slices.IsSorted(got.Allowed) {
			t.Fatalf("allow-list not sorted: %q", got.Allowed)
		}
		for _, c := range got.Allowed {
			if !got.allows(c) {
				t.Fatalf("the allow-list %q does not allow %q", got.Allowed, c)
			}
		}
		if got.Allowed == nil && !got.allows("any-class") {
			t.Fatal("no allow-list, but a class is refused")
		}
		_ = got.allowedText()

		var v tenantValues
		v.Namespace = &struct {
			DefaultAffinityClass   string    `json:"defaultAffinityClass"`
			AllowedAffinityClasses *[]string `json:"allowedAffinityClasses"`
		}{DefaultAffinityClass: got.Default}
		if got.Allowed != nil {
			v.Namespace.AllowedAffinityClasses = &got.Allowed
		}
		written, err := yaml.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if again := parseTenant("ns", written); !reflect.DeepEqual(again, got) {
			t.Fatalf("the tenant written back reads differently:\n  %+v\n  %+v\n%s", got, again, written)
		}
	})
}

func releaseSeeds() []string {
	rel := func(metadata, spec string) string {
		return `{"apiVersion":"helm.toolkit.fluxcd.io/v2","kind":"HelmRelease","metadata":` + metadata + `,"spec":` + spec + `}`
	}
	return []string{
		rel(`{"name":"app","namespace":"tenant-a","labels":{"apps.cozystack.io/application.kind":"Postgres"}}`, `{"chart":{"spec":{"chart":"postgres"}},"interval":"5m","replicas":100000000000000001,"values":{"affinityClass":"gpu"}}`),
		rel(`{"name":"app"}`, `{"values":{"affinityClass":"dc1","_scheduling":{"affinityClass":"old"}}}`),
		rel(`{"generateName":"app-","labels":{"apps.cozystack.io/affinity-class":"gpu"}}`, `{"values":{"_scheduling":{}}}`),
		rel(`{"name":"app"}`, `{"values":{"affinityClass":7}}`),
		rel(`{"name":"app"}`, `{"values":{"affinityClass":null}}`),
		rel(`{"name":"app"}`, `{"values":{"affinityClass":""}}`),
		rel(`{"name":"app"}`, `{"values":{"affinityClass":"dc9"}}`),
		rel(`{"name":"app","labels":"x"}`, `{"values":"x"}`),
		rel(`{"name":"app"}`, `{}`),
		rel(`{"name":"a/b~c","labels":{"a/b~c":"1"}}`, `{"values":{"affinityClass":"dc1","x":1.50,"y":-0,"z":1e3}}`),
		`{"metadata":{}}`,
		`{"spec":{}}`,
		`null`,
		`{`,
	}
}

// FuzzReleaseValues sends random HelmReleases, in namespaces whose tenant
// values.yaml is random too, through the release webhook's decision on an
// application's release (admitApplicationRelease). It never panics
// and answers allowed, a 403 denial or, for what is not a HelmRelease
// object, a 400. For a release the API server could have sent (it decodes
// with encoding/json): the class read from spec.values (resolveClass)
// decides the outcome; the patch touches only the class label and
// spec.values; the patched release carries the class in both or in
// neither; and a second pass over it patches nothing.
func FuzzReleaseValues(f *testing.F) {
	releases, tenants := releaseSeeds(), tenantSeeds()
	for i, r := range releases {
		f.Add([]byte(r), []byte(tenants[i%len(tenants)]))
	}
	f.Fuzz(func(t *testing.T, raw, values []byte) {
		ctx := context.Background()
		tn := parseTenant("tenant-a", values)
		m := &Module{view: view{classes: testClasses, tenants: memTenants{"tenant-a": tn}}}
		req := func(raw []byte) admission.Request {
			return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				UID: "fuzz", Operation: admissionv1.Create, Namespace: "tenant-a", Name: "app", Object: runtime.RawExtension{Raw: raw},
			}}
		}
		resp := m.admitApplicationRelease(ctx, req(raw))

		var obj map[string]any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		err := dec.Decode(&obj)
		if err == nil {
			if _, trailing := dec.Token(); !errors.Is(trailing, io.EOF) {
				err = errors.New("data after the object")
			}
		}
		if err != nil {
			if resp.Allowed || resp.Result.Code != http.StatusBadRequest {
				t.Fatalf("an undecodable release was not refused with a 400: %+v", resp.Result)
			}
			return
		}
		metadata, _ := obj["metadata"].(map[string]any)
		spec, _ := obj["spec"].(map[string]any)
		if metadata == nil || spec == nil {
			if resp.Allowed || resp.Result.Code != http.StatusBadRequest {
				t.Fatalf("a release without metadata or spec was not refused with a 400: %+v", resp.Result)
			}
			return
		}
		specValues, _ := spec["values"].(map[string]any)
		want, classErr := resolveClass(specValues, tn)
		checkResolved(t, specValues, tn, want, classErr)

		if !resp.Allowed {
			if resp.Result == nil || resp.Result.Code != http.StatusForbidden {
				t.Fatalf("refused other than by a denial: %+v", resp.Result)
			}
			_, known := testClasses[want.Name]
			if classErr == nil && (tn == nil || tn.Err == nil) && (want.Name == "" || known && tn.allows(want.Name)) {
				t.Fatalf("denied a release with an existing, allowed class %q: %s", want.Name, resp.Result.Message)
			}
			return
		}
		if classErr != nil || (tn != nil && tn.Err != nil) {
			t.Fatalf("admitted despite %v / tenant %+v", classErr, tn)
		}
		var strict any
		if json.Unmarshal(raw, &strict) != nil {
			return // not what the API server sends (a number out of range, say): the patch may fail
		}
		for _, p := range resp.Patches {
			if !strings.HasPrefix(p.Path, "/metadata/labels") && !strings.HasPrefix(p.Path, "/spec/values") {
				t.Fatalf("patch touches %s: %s\n%s", p.Path, patchText(resp), raw)
			}
		}
		patched := raw
		if len(resp.Patches) > 0 {
			p, _ := json.Marshal(resp.Patches)
			decoded, err := jsonpatch.DecodePatch(p)
			if err != nil {
				t.Fatal(err)
			}
			if patched, err = decoded.Apply(raw); err != nil {
				t.Fatalf("the patch does not apply: %v\n%s\n%s", err, p, raw)
			}
		}
		var out map[string]any
		if err := json.Unmarshal(patched, &out); err != nil {
			t.Fatal(err)
		}
		outMeta, _ := out["metadata"].(map[string]any)
		outLabels, _ := outMeta["labels"].(map[string]any)
		outSpec, _ := out["spec"].(map[string]any)
		outValues, _ := outSpec["values"].(map[string]any)
		label, hasLabel := outLabels[classLabel]
		sched, hasSched := outValues[schedulingKey].(map[string]any)
		if want.Name == "" {
			if hasLabel || outValues[schedulingKey] != nil {
				t.Fatalf("no class, but the label or _scheduling is left: %s", patched)
			}
		} else if label != want.Name || !hasSched || sched["affinityClass"] != want.Name {
			t.Fatalf("class %q, but the release has label %v and _scheduling %v: %s", want.Name, label, sched, patched)
		}
		if again := m.admitApplicationRelease(ctx, req(patched)); !again.Allowed || len(again.Patches) != 0 {
			t.Fatalf("a second pass changed the release: %s\n%s", patchText(again), patched)
		}
	})
}

// checkResolved is resolveClass's contract: the release's own non-empty
// string wins, then the tenant's default; anything else in
// spec.values.affinityClass but null is an error.
func checkResolved(t *testing.T, values map[string]any, tn *tenant, got releaseClass, err error) {
	t.Helper()
	raw, set := values["affinityClass"]
	own, isString := raw.(string)
	switch {
	case set && raw != nil && !isString:
		if err == nil {
			t.Fatalf("affinityClass %#v accepted", raw)
		}
		return
	case err != nil:
		t.Fatalf("affinityClass %#v refused: %v", raw, err)
	case own != "":
		if got != (releaseClass{own, "spec.values.affinityClass"}) {
			t.Fatalf("affinityClass %q resolved as %+v", own, got)
		}
	case tn != nil && tn.Default != "":
		if got != (releaseClass{tn.Default, "the tenant's defaultAffinityClass"}) {
			t.Fatalf("default %q resolved as %+v", tn.Default, got)
		}
	default:
		if got != (releaseClass{}) {
			t.Fatalf("no class resolved as %+v", got)
		}
	}
}
