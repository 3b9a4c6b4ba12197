package configcheck

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/authz"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
	"github.com/gatehouse-dev/gatehouse/internal/module/moduletest"
	"github.com/gatehouse-dev/gatehouse/internal/records"
)

var (
	alice = authenticationv1.UserInfo{Username: "alice", Groups: []string{"team-a"}}
	admin = authenticationv1.UserInfo{Username: "platform-admin", Groups: []string{"system:masters"}}
)

func authorModule() (*Module, *moduletest.Host) {
	h := moduletest.New(runtime.NewScheme())
	return &Module{host: h}, h
}

func authorConfig(ns, name string, gen int64, spec string) *gatehousev1alpha1.HAProxyTemplateConfig {
	cfg := &gatehousev1alpha1.HAProxyTemplateConfig{}
	cfg.Namespace, cfg.Name, cfg.UID, cfg.Generation = ns, name, types.UID("uid-"+name), gen
	cfg.CreationTimestamp = metav1.NewTime(time.Now().Truncate(time.Second))
	cfg.Spec.HAProxyConfig.Template = spec
	return cfg
}

func raw(t *testing.T, obj any) runtime.RawExtension {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: b}
}

// stored applies the author webhook's answer to cfg, as the API server
// stores it (with the metadata the API server sets after the webhook).
func admitStored(t *testing.T, m *Module, op admissionv1.Operation, user authenticationv1.UserInfo, cfg, old *gatehousev1alpha1.HAProxyTemplateConfig) *gatehousev1alpha1.HAProxyTemplateConfig {
	t.Helper()
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: op, Namespace: cfg.Namespace, Name: cfg.Name, UserInfo: user, Object: raw(t, cfg)}}
	if old != nil {
		req.OldObject = raw(t, old)
	}
	resp := m.admitAuthor(context.Background(), req)
	if !resp.Allowed {
		t.Fatalf("author webhook refused: %v", resp.Result)
	}
	out := cfg.DeepCopy()
	if len(resp.Patches) > 0 {
		b, _ := json.Marshal(resp.Patches)
		patch, err := jsonpatch.DecodePatch(b)
		if err != nil {
			t.Fatal(err)
		}
		patched, err := patch.Apply(req.Object.Raw)
		if err != nil {
			t.Fatal(err)
		}
		out = &gatehousev1alpha1.HAProxyTemplateConfig{}
		if err := json.Unmarshal(patched, out); err != nil {
			t.Fatal(err)
		}
	}
	if want := cfg.Annotations[authz.ClaimAnnotation]; want != "" && out.Annotations[authz.ClaimAnnotation] != "" {
		t.Fatalf("the claim annotation was not removed")
	}
	return out
}

func TestAuthorRecordFollowsTheSpecsWriter(t *testing.T) {
	m, h := authorModule()
	cfg := authorConfig("team-a", "front", 0, "a")
	cfg.Annotations = map[string]string{authz.AuthorAnnotation: `{"username":"platform-admin","groups":["system:masters"]}`}
	created := admitStored(t, m, admissionv1.Create, alice, cfg, nil)
	created.Generation = 1
	user, _, refusal := authz.VerifiedAuthor(h.Records(), h.Namespace(), spec.GatehouseConfig{HAProxyTemplateConfig: created})
	if refusal != "" || user.Username != "alice" {
		t.Fatalf("after the create: %q, %v", refusal, user)
	}

	// A label change by an administrator keeps alice, now bound to the uid.
	labelled := created.DeepCopy()
	labelled.Labels = map[string]string{"x": "y"}
	relabelled := admitStored(t, m, admissionv1.Update, admin, labelled, created)
	if user, _, refusal := authz.VerifiedAuthor(h.Records(), h.Namespace(), spec.GatehouseConfig{HAProxyTemplateConfig: relabelled}); refusal != "" || user.Username != "alice" {
		t.Fatalf("after a label change: %q, %v", refusal, user)
	}
	if !strings.Contains(relabelled.Annotations[authz.AuthorAnnotation], `"uid":"uid-front"`) {
		t.Fatalf("the record is not bound to the uid: %s", relabelled.Annotations[authz.AuthorAnnotation])
	}

	// A spec change by the administrator makes them the author, of the
	// next generation.
	written := relabelled.DeepCopy()
	written.Spec.HAProxyConfig.Template = "b"
	rewritten := admitStored(t, m, admissionv1.Update, admin, written, relabelled)
	if _, _, refusal := authz.VerifiedAuthor(h.Records(), h.Namespace(), spec.GatehouseConfig{HAProxyTemplateConfig: rewritten}); !strings.Contains(refusal, "generation 2") {
		t.Fatalf("a record of generation 2 read on generation 1: %q", refusal)
	}
	rewritten.Generation = 2
	if user, _, refusal := authz.VerifiedAuthor(h.Records(), h.Namespace(), spec.GatehouseConfig{HAProxyTemplateConfig: rewritten}); refusal != "" || user.Username != "platform-admin" {
		t.Fatalf("after the spec change: %q, %v", refusal, user)
	}

	// A claim makes the claimer the author without a spec change.
	claiming := rewritten.DeepCopy()
	claiming.Annotations[authz.ClaimAnnotation] = "yes"
	claimed := admitStored(t, m, admissionv1.Update, alice, claiming, rewritten)
	if user, _, refusal := authz.VerifiedAuthor(h.Records(), h.Namespace(), spec.GatehouseConfig{HAProxyTemplateConfig: claimed}); refusal != "" || user.Username != "alice" {
		t.Fatalf("after a claim: %q, %v", refusal, user)
	}
}

func TestForgedAuthorRecordsAreNotHonoured(t *testing.T) {
	m, h := authorModule()
	cfg := authorConfig("team-a", "front", 1, "a")
	signed := admitStored(t, m, admissionv1.Create, alice, cfg, nil)
	signed.Generation = 1
	labelled := signed.DeepCopy()
	labelled.Labels = map[string]string{"x": "y"}
	bound := admitStored(t, m, admissionv1.Update, alice, labelled, signed)
	record := func(mutate func(r *authz.Record)) string {
		var r authz.Record
		if err := json.Unmarshal([]byte(bound.Annotations[authz.AuthorAnnotation]), &r); err != nil {
			t.Fatal(err)
		}
		mutate(&r)
		b, _ := json.Marshal(r)
		return string(b)
	}
	otherKey := records.NewStatic()
	tests := []struct {
		name   string
		cfg    func() *gatehousev1alpha1.HAProxyTemplateConfig
		reason string
	}{
		{"unsigned, as older versions wrote", func() *gatehousev1alpha1.HAProxyTemplateConfig {
			c := bound.DeepCopy()
			c.Annotations[authz.AuthorAnnotation] = `{"username":"platform-admin","groups":["system:masters"]}`
			return c
		}, "not one this install signed"},
		{"another identity under the signature", func() *gatehousev1alpha1.HAProxyTemplateConfig {
			c := bound.DeepCopy()
			c.Annotations[authz.AuthorAnnotation] = record(func(r *authz.Record) { r.User = admin })
			return c
		}, "not one this install signed"},
		{"signed by another install", func() *gatehousev1alpha1.HAProxyTemplateConfig {
			c := bound.DeepCopy()
			c.Annotations[authz.AuthorAnnotation] = record(func(r *authz.Record) {
				r.Sig = otherKey.Sign(authz.RecordPurpose(spec.GatehouseKind), r.Claims(c.Namespace, c.Name))
			})
			return c
		}, "not one this install signed"},
		{"copied to another config", func() *gatehousev1alpha1.HAProxyTemplateConfig {
			c := bound.DeepCopy()
			c.Name = "other"
			return c
		}, "not one this install signed"},
		{"copied to another namespace", func() *gatehousev1alpha1.HAProxyTemplateConfig {
			c := bound.DeepCopy()
			c.Namespace = "team-b"
			return c
		}, "not one this install signed"},
		{"replayed on an object of the same name created again", func() *gatehousev1alpha1.HAProxyTemplateConfig {
			c := bound.DeepCopy()
			c.UID = "uid-again"
			return c
		}, "another object"},
		{"kept over a spec written since", func() *gatehousev1alpha1.HAProxyTemplateConfig {
			c := bound.DeepCopy()
			c.Generation = 2
			return c
		}, "generation 2"},
		{"a creation record replayed on a later creation", func() *gatehousev1alpha1.HAProxyTemplateConfig {
			c := signed.DeepCopy()
			c.UID = "uid-again"
			c.CreationTimestamp = metav1.NewTime(c.CreationTimestamp.Add(time.Minute))
			return c
		}, "creation of another object"},
		{"in kube-node-lease, signed or not", func() *gatehousev1alpha1.HAProxyTemplateConfig {
			c := authorConfig("kube-node-lease", "front", 1, "a")
			c.Annotations = map[string]string{authz.AuthorAnnotation: `{"username":"platform-admin","groups":["system:masters"]}`}
			return c
		}, "never read"},
		{"in Gatehouse's namespace", func() *gatehousev1alpha1.HAProxyTemplateConfig {
			c := authorConfig(h.Namespace(), "front", 1, "a")
			return c
		}, "never read"},
		{"none", func() *gatehousev1alpha1.HAProxyTemplateConfig {
			return authorConfig("team-a", "front", 1, "a")
		}, "records no author"},
	}
	if _, _, refusal := authz.VerifiedAuthor(h.Records(), h.Namespace(), spec.GatehouseConfig{HAProxyTemplateConfig: bound}); refusal != "" {
		t.Fatalf("the genuine record: %s", refusal)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, refusal := authz.VerifiedAuthor(h.Records(), h.Namespace(), spec.GatehouseConfig{HAProxyTemplateConfig: tc.cfg()})
			if !strings.Contains(refusal, tc.reason) {
				t.Fatalf("refusal %q, want it to say %q", refusal, tc.reason)
			}
		})
	}
}

// A generateName'd config has no name when the author webhook signs, and
// is refused rather than given a record that binds no name.
func TestAuthorWebhookRefusesGenerateName(t *testing.T) {
	m, _ := authorModule()
	cfg := authorConfig("team-a", "", 0, "a")
	cfg.GenerateName = "front-"
	resp := m.admitAuthor(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create, Namespace: "team-a", UserInfo: alice, Object: raw(t, cfg)}})
	if resp.Allowed || !strings.Contains(resp.Result.Message, "generateName") {
		t.Fatalf("got %v", resp.Result)
	}
}

// The config webhook sees the object as stored and refuses one whose
// record the reader would not honour, or that names someone else.
func TestConfigWebhookChecksTheRecord(t *testing.T) {
	m, _ := authorModule()
	cfg := authorConfig("team-a", "front", 0, "a")
	created := admitStored(t, m, admissionv1.Create, alice, cfg, nil)
	created.Generation = 1
	req := func(op admissionv1.Operation, user authenticationv1.UserInfo, obj, old *gatehousev1alpha1.HAProxyTemplateConfig) admission.Request {
		r := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: op, Namespace: obj.Namespace, Name: obj.Name, UserInfo: user, Object: raw(t, obj)}}
		if old != nil {
			r.OldObject = raw(t, old)
		}
		return r
	}
	if refusal, err := m.checkAuthorRecord(req(admissionv1.Create, alice, created, nil), spec.GatehouseConfig{HAProxyTemplateConfig: created}); err != nil || refusal != "" {
		t.Fatalf("the author webhook's record refused: %q %v", refusal, err)
	}
	if refusal, _ := m.checkAuthorRecord(req(admissionv1.Create, admin, created, nil), spec.GatehouseConfig{HAProxyTemplateConfig: created}); refusal == "" {
		t.Fatal("a record naming another user than the writer was admitted")
	}
	forged := cfg.DeepCopy()
	forged.Generation = 1
	forged.Annotations = map[string]string{authz.AuthorAnnotation: `{"username":"alice"}`}
	if refusal, _ := m.checkAuthorRecord(req(admissionv1.Create, alice, forged, nil), spec.GatehouseConfig{HAProxyTemplateConfig: forged}); refusal == "" {
		t.Fatal("an unsigned record was admitted")
	}
	// A spec change whose record a later webhook kept (generation 1 on
	// generation 2).
	written := created.DeepCopy()
	written.Spec.HAProxyConfig.Template = "b"
	written.Generation = 2
	if refusal, _ := m.checkAuthorRecord(req(admissionv1.Update, alice, written, created), spec.GatehouseConfig{HAProxyTemplateConfig: written}); refusal == "" {
		t.Fatal("a stale record was admitted on a spec change")
	}
}

// TestAuthorRecordIsRenewedBeforeItsKeyGoes: a config nobody writes keeps
// its author across rotations. A record signed with a key that no longer
// signs is signed again with the newest (the access controller patches it
// at its next check); the renewed record names the same author and binds
// the uid; once the old key is dropped, the old record is refused and the
// renewed one still verifies.
func TestAuthorRecordIsRenewedBeforeItsKeyGoes(t *testing.T) {
	m, h := authorModule()
	first, err := records.NewKey(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	h.Keys.Ring = records.NewKeyring([]records.Key{first}, time.Now(), 0)
	cfg := authorConfig("team-a", "front", 0, "a")
	stored := admitStored(t, m, admissionv1.Create, alice, cfg, nil)
	stored.Generation = 1
	if record, refusal := authz.RenewedRecord(h.Records(), h.Namespace(), spec.GatehouseConfig{HAProxyTemplateConfig: stored}); record != "" || refusal != "" {
		t.Fatalf("a record signed with the newest key: renewed %q, refused %q", record, refusal)
	}

	newer, err := records.NewKey(time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	// Rotated: the newest key signs, the one the record was signed with is
	// still kept for verifying.
	h.Keys.Ring = records.NewKeyring([]records.Key{newer, first}, time.Now().Add(2*time.Hour), 0)
	record, refusal := authz.RenewedRecord(h.Records(), h.Namespace(), spec.GatehouseConfig{HAProxyTemplateConfig: stored})
	if record == "" || refusal != "" {
		t.Fatalf("a record signed with an older key: renewed %q, refused %q", record, refusal)
	}
	renewed := stored.DeepCopy()
	renewed.Annotations[authz.AuthorAnnotation] = record
	if !strings.Contains(record, `"uid":"uid-front"`) {
		t.Fatalf("the renewed record is not bound to the uid: %s", record)
	}

	// The old key dropped: the old record is refused, the renewed one is
	// alice's still.
	h.Keys.Ring = records.NewKeyring([]records.Key{newer}, time.Now().Add(2*time.Hour), 0)
	if _, _, refusal := authz.VerifiedAuthor(h.Records(), h.Namespace(), spec.GatehouseConfig{HAProxyTemplateConfig: stored}); refusal == "" {
		t.Fatal("a record whose key was dropped is honoured")
	}
	if user, current, refusal := authz.VerifiedAuthor(h.Records(), h.Namespace(), spec.GatehouseConfig{HAProxyTemplateConfig: renewed}); refusal != "" || !current || user.Username != "alice" {
		t.Fatalf("the renewed record: %v current %v refused %q", user, current, refusal)
	}
}
