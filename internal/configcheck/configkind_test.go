package configcheck

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	hapticv1alpha1 "github.com/gatehouse-dev/gatehouse/api/haproxy-haptic.org/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/authz"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/guard"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/judge"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/suite"
)

var hapticRequestKind = metav1.GroupVersionKind{Group: "haproxy-haptic.org", Version: "v1alpha1", Kind: "HAProxyTemplateConfig"}

// TestConfigsOfTwoKindsNeverMeet: a Gatehouse config and a haptic config
// of one namespace and name are two configs everywhere the module names
// one: the state's key, the workqueues' items, fair shares, and the
// webhooks the API server calls.
func TestConfigsOfTwoKindsNeverMeet(t *testing.T) {
	nn := types.NamespacedName{Namespace: "team-a", Name: "edge"}
	ours, theirs := spec.GatehouseKey(nn), spec.Key{Kind: spec.HapticKind, NamespacedName: nn}
	if ours == theirs || ours.String() == theirs.String() || guard.ConfigParty(ours) == guard.ConfigParty(theirs) {
		t.Fatalf("keys %v and %v meet", ours, theirs)
	}
	for _, k := range []spec.Key{ours, theirs} {
		if got := spec.KeyOfRequest(k.Request()); got != k {
			t.Errorf("%v came back from its workqueue item as %v", k, got)
		}
	}
	if ours.Request() != (reconcile.Request{NamespacedName: nn}) {
		t.Errorf("Gatehouse's items changed: %v", ours.Request())
	}
	if webhookName(ours, "ingresses") == webhookName(theirs, "ingresses") || webhookPath("configcheck", ours, "ingresses") == webhookPath("configcheck", theirs, "ingresses") {
		t.Errorf("one webhook for both: %s %s", webhookName(theirs, "ingresses"), webhookPath("configcheck", theirs, "ingresses"))
	}
	// A Gatehouse config in namespace haproxy-haptic.org cannot exist (a
	// namespace name has no dots), nor a name with a slash: no item of
	// one kind reads as the other's.
	if got := spec.KeyOfRequest(spec.GatehouseKey(types.NamespacedName{Namespace: "team-a", Name: "haproxy-haptic.org"}).Request()); got.Kind != spec.GatehouseKind {
		t.Errorf("a Gatehouse config named after haptic's group read as %v", got)
	}
}

// hapticAuthorConfig is a haptic config as authorConfig makes Gatehouse's.
func hapticAuthorConfig(ns, name string, gen int64) *hapticv1alpha1.HAProxyTemplateConfig {
	cfg := &hapticv1alpha1.HAProxyTemplateConfig{}
	cfg.APIVersion, cfg.Kind = hapticv1alpha1.GroupVersion.String(), "HAProxyTemplateConfig"
	cfg.Namespace, cfg.Name, cfg.UID, cfg.Generation = ns, name, types.UID("uid-"+name), gen
	cfg.CreationTimestamp = metav1.NewTime(time.Now().Truncate(time.Second))
	cfg.Spec.HAProxyConfig.Template = "global\n"
	return cfg
}

// TestAuthorRecordsDoNotCrossKinds, as an attacker who may write haptic
// configs in a namespace where an administrator wrote a Gatehouse config
// of the same name: the administrator's signed record, copied onto the
// tenant's haptic config (while the webhooks do not run), is not honoured
// there, though it binds the same namespace, name and generation.
func TestAuthorRecordsDoNotCrossKinds(t *testing.T) {
	m, _ := authorModule()
	adminsConfig := admitStored(t, m, admissionv1.Create, admin, authorConfig("team-a", "edge", 0, "a"), nil)
	adminsConfig.Generation = 1
	if _, _, refusal := authz.VerifiedAuthor(m.host.Records(), m.host.Namespace(), spec.GatehouseConfig{HAProxyTemplateConfig: adminsConfig}); refusal != "" {
		t.Fatalf("the administrator's own record: %s", refusal)
	}
	tenants := hapticAuthorConfig("team-a", "edge", 1)
	tenants.CreationTimestamp = adminsConfig.CreationTimestamp
	tenants.Annotations = map[string]string{authz.AuthorAnnotation: adminsConfig.Annotations[authz.AuthorAnnotation]}
	if user, _, refusal := authz.VerifiedAuthor(m.host.Records(), m.host.Namespace(), spec.HapticConfig{HAProxyTemplateConfig: tenants}); refusal == "" {
		t.Fatalf("a Gatehouse config's record was honoured on a haptic config: %v", user)
	}

	// The author webhook signs haptic's configs for their own kind.
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Kind: hapticRequestKind, Operation: admissionv1.Create,
		Namespace: "team-a", Name: "edge", UserInfo: alice, Object: raw(t, hapticAuthorConfig("team-a", "edge", 0))}}
	stored := hapticAuthorConfig("team-a", "edge", 1)
	stored.Annotations = applyPatch(t, req.Object.Raw, m.admitAuthor(context.Background(), req)).GetAnnotations()
	user, _, refusal := authz.VerifiedAuthor(m.host.Records(), m.host.Namespace(), spec.HapticConfig{HAProxyTemplateConfig: stored})
	if refusal != "" || user.Username != alice.Username {
		t.Fatalf("haptic config's own record: %v %q", user, refusal)
	}
}

// applyPatch applies resp's patch to raw, as the API server stores it.
func applyPatch(t *testing.T, raw []byte, resp admission.Response) *metav1.PartialObjectMetadata {
	t.Helper()
	if !resp.Allowed {
		t.Fatalf("refused: %v", resp.Result)
	}
	b, _ := json.Marshal(resp.Patches)
	patch, err := jsonpatch.DecodePatch(b)
	if err != nil {
		t.Fatal(err)
	}
	patched, err := patch.Apply(raw)
	if err != nil {
		t.Fatal(err)
	}
	out := &metav1.PartialObjectMetadata{}
	if err := json.Unmarshal(patched, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestAuthorWebhookPatchesTheAnnotationAlone: a haptic config carries
// fields Gatehouse's copy of haptic's types may not know (a newer haptic
// CRD); the author webhook's patch touches the author annotation and
// nothing else, so no such field is lost.
func TestAuthorWebhookPatchesTheAnnotationAlone(t *testing.T) {
	m, _ := authorModule()
	object := []byte(`{"apiVersion":"haproxy-haptic.org/v1alpha1","kind":"HAProxyTemplateConfig",` +
		`"metadata":{"namespace":"team-a","name":"edge","annotations":{"configcheck.gatehouse.dev/author":"forged","team":"a"}},` +
		`"spec":{"haproxyConfig":{"template":"global\n"},"watchedResources":{},"futureField":{"keep":true}},"status":{"phase":"Ready"}}`)
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Kind: hapticRequestKind, Operation: admissionv1.Create,
		Namespace: "team-a", Name: "edge", UserInfo: alice, Object: runtime.RawExtension{Raw: object}}}
	resp := m.admitAuthor(context.Background(), req)
	if !resp.Allowed || len(resp.Patches) != 1 || resp.Patches[0].Path != "/metadata/annotations/configcheck.gatehouse.dev~1author" || resp.Patches[0].Operation != "replace" {
		t.Fatalf("patch %+v (%v)", resp.Patches, resp.Result)
	}
}

// TestRequestsOfAnUnknownKindAreRefused: a review naming a kind the
// module does not follow (posted to the port) is refused, not read as
// one of its kinds.
func TestRequestsOfAnUnknownKindAreRefused(t *testing.T) {
	m, _ := authorModule()
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Kind: metav1.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "HAProxyTemplateConfig"},
		Operation: admissionv1.Create, Namespace: "team-a", Name: "edge", UserInfo: alice, Object: raw(t, authorConfig("team-a", "edge", 0, "a"))}}
	for name, resp := range map[string]admission.Response{"author": m.admitAuthor(context.Background(), req), "config": m.admitConfig(context.Background(), req)} {
		if resp.Allowed || !strings.Contains(resp.Result.Message, "not a kind of config configcheck follows") {
			t.Errorf("%s webhook: %+v", name, resp.Result)
		}
	}
}

// TestHapticAuthorsNeedNoPublishingRights: Gatehouse publishes nothing of
// a haptic config, so its author is asked for the rights the config reads
// with, never for the ConfigMap and Secret Gatehouse writes for its own
// kind.
func TestHapticAuthorsNeedNoPublishingRights(t *testing.T) {
	c := &spec.Compiled{Watched: map[string]*spec.Watched{}}
	nn := types.NamespacedName{Namespace: "team-a", Name: "edge"}
	published := func(reqs []authz.Requirement) (out []string) {
		for _, r := range reqs {
			if r.Question.Resource == "configmaps" || r.Question.Resource == "secrets" {
				out = append(out, r.Question.Verb+" "+r.Question.Resource)
			}
		}
		return out
	}
	if got := published(authz.Requirements(spec.GatehouseKey(nn), c, nil, true)); len(got) != 4 {
		t.Errorf("Gatehouse's kind: %v", got)
	}
	if got := published(authz.Requirements(spec.Key{Kind: spec.HapticKind, NamespacedName: nn}, c, nil, true)); len(got) != 0 {
		t.Errorf("haptic's kind asks for %v", got)
	}
}

// TestMessagesNameTheKind: what a haptic config's tenants and author read
// names the config with its group, and says what a failing rendering
// holds back there (haptic's controller's deployment), not Gatehouse's
// publishing, which haptic's kind does not have.
func TestMessagesNameTheKind(t *testing.T) {
	nn := types.NamespacedName{Namespace: "lb", Name: "edge"}
	haptic := spec.Key{Kind: spec.HapticKind, NamespacedName: nn}
	for _, text := range []string{
		judge.PreexistingWarnings(haptic, "rendering failed: x")[0],
		decideCurrentState(haptic, judge.Verdict{Denial: "x"}, []string{"ingresses"}, "t", nil).warnings[0],
		decideWithoutState(haptic, judge.Verdict{Denial: "x"}, "t").warnings[0],
	} {
		if !strings.Contains(text, "HAProxyTemplateConfig lb/edge (haproxy-haptic.org)") || !strings.Contains(text, "haptic's controller does not deploy") || strings.Contains(text, "Published") {
			t.Errorf("%q", text)
		}
	}
	if text := judge.PreexistingWarnings(spec.GatehouseKey(nn), "rendering failed: x")[0]; !strings.Contains(text, "HAProxyTemplateConfig lb/edge fails") || !strings.Contains(text, "nothing is published") {
		t.Errorf("Gatehouse's kind: %q", text)
	}
}

// TestKeysLogAsBefore: Gatehouse's configs are logged as before haptic's
// kind was followed (log queries keep working); haptic's carry their group.
func TestKeysLogAsBefore(t *testing.T) {
	nn := types.NamespacedName{Namespace: "lb", Name: "edge"}
	if got, want := spec.GatehouseKey(nn).MarshalLog(), nn.MarshalLog(); got != want {
		t.Errorf("Gatehouse's kind logs as %v, want %v", got, want)
	}
	b, _ := json.Marshal(spec.Key{Kind: spec.HapticKind, NamespacedName: nn}.MarshalLog())
	if string(b) != `{"name":"edge","namespace":"lb","group":"haproxy-haptic.org"}` {
		t.Errorf("haptic's kind logs as %s", b)
	}
}

// TestHapticRenderingsAreCheckedAsHapticChecksThem: every check of a
// haptic config's rendering (an admission's, not only its tests') reads
// haptic's base directory as the check's, as haptic's validator does.
// Before, only the tests did: in a cluster, every rendering of haptic's
// chart config failed the check policy at its default-path line, and
// every change was admitted as "failing already".
func TestHapticRenderingsAreCheckedAsHapticChecksThem(t *testing.T) {
	m := &Module{checker: testChecker(t, nil)}
	out := render.Output{HAProxyConfig: "global\n  default-path origin /etc/haproxy\ndefaults\n  mode http\n  timeout connect 1s\n  timeout client 1s\n  timeout server 1s\n" +
		"frontend f\n  bind 127.0.0.1:8080\n  default_backend b\nbackend b\n  server s 127.0.0.1:80\n"}
	if v := m.checkRendering(t.Context(), suite.DialectHaptic, out, ""); v.Denial != "" || v.Undecided != "" {
		t.Fatalf("haptic's rendering: %+v", v)
	}
	if v := m.checkRendering(t.Context(), suite.DialectGatehouse, out, ""); !strings.Contains(v.Denial, "default-path") {
		t.Fatalf("Gatehouse's kind keeps the policy's refusal: %+v", v)
	}
}
