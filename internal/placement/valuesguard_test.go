package placement

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

func valuesRequest(t *testing.T, op admissionv1.Operation, user authenticationv1.UserInfo, before, after *string) admission.Request {
	t.Helper()
	raw := func(values *string) runtime.RawExtension {
		if values == nil {
			return runtime.RawExtension{}
		}
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: tenantSecretName}, Data: map[string][]byte{tenantValuesKey: []byte(*values)}}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: b}
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "u", Operation: op, Namespace: "tenant-a", Name: tenantSecretName, UserInfo: user,
		OldObject: raw(before), Object: raw(after),
	}}
}

func TestAdmitTenantValues(t *testing.T) {
	m := New(Options{})
	tenantUser := authenticationv1.UserInfo{Username: "alice", Groups: []string{"system:authenticated"}}
	flux := authenticationv1.UserInfo{Username: "system:serviceaccount:flux-system:helm-controller"}
	admin := authenticationv1.UserInfo{Username: "root", Groups: []string{"system:masters"}}
	nsController := authenticationv1.UserInfo{Username: namespaceController}
	str := func(s string) *string { return &s }
	narrow := str("_namespace:\n  defaultAffinityClass: dc1\n  allowedAffinityClasses: [dc1]\n")
	wide := str("_namespace:\n  defaultAffinityClass: dc1\n  allowedAffinityClasses: [dc1, gpu]\n")
	reordered := str("_cluster:\n  host: a\n_namespace:\n  allowedAffinityClasses: [dc1]\n  defaultAffinityClass: dc1\n")
	none := str("_namespace:\n  host: a\n")
	broken := str("_namespace: [\n")

	for _, tc := range []struct {
		name          string
		op            admissionv1.Operation
		user          authenticationv1.UserInfo
		before, after *string
		refusal       string
	}{
		{"the tenant widens its allow-list", admissionv1.Update, tenantUser, narrow, wide, `user "alice" may not change its placement settings`},
		{"the tenant drops its settings", admissionv1.Update, tenantUser, narrow, none, "from default dc1, allowed dc1 to none"},
		{"the tenant breaks its values", admissionv1.Update, tenantUser, narrow, broken, "to unreadable values"},
		{"the tenant deletes the Secret", admissionv1.Delete, tenantUser, narrow, nil, "may not delete it"},
		{"the tenant creates it with settings", admissionv1.Create, tenantUser, nil, wide, "may not create it with placement settings"},
		{"the tenant changes another key", admissionv1.Update, tenantUser, narrow, reordered, ""},
		{"the tenant creates it without settings", admissionv1.Create, tenantUser, nil, none, ""},
		{"the tenant deletes one without settings", admissionv1.Delete, tenantUser, none, nil, ""},
		{"helm-controller widens it", admissionv1.Update, flux, narrow, wide, ""},
		{"a cluster admin deletes it", admissionv1.Delete, admin, narrow, nil, ""},
		{"the namespace controller deletes it", admissionv1.Delete, nsController, narrow, nil, ""},
		{"the namespace controller may not change it", admissionv1.Update, nsController, narrow, wide, "may not change"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := m.admitTenantValues(context.Background(), valuesRequest(t, tc.op, tc.user, tc.before, tc.after))
			if tc.refusal == "" {
				if !resp.Allowed {
					t.Fatalf("refused: %v", resp.Result.Message)
				}
				return
			}
			if resp.Allowed || module.ClassOf(resp) != module.ClassNotPermitted || !strings.Contains(resp.Result.Message, tc.refusal) {
				t.Fatalf("allowed=%v result=%+v, want a NotPermitted refusal naming %q", resp.Allowed, resp.Result, tc.refusal)
			}
		})
	}
	// Warn mode never relaxes the guard.
	resp := m.admitTenantValues(context.Background(), valuesRequest(t, admissionv1.Update, tenantUser, narrow, wide))
	if relaxed := module.Warn.Apply("placement", module.DecisionOf(resp)); relaxed.Response.Allowed {
		t.Fatal("warn mode let a tenant change its own allow-list")
	}
}

func TestPlatformIdentitiesAreConfigurable(t *testing.T) {
	m := New(Options{PlatformUsers: []string{"system:serviceaccount:cozy-fluxcd:helm-controller"}, PlatformGroups: []string{}})
	if m.isPlatform(authenticationv1.UserInfo{Username: "system:serviceaccount:flux-system:helm-controller"}) {
		t.Fatal("the default user is a platform identity after it was replaced")
	}
	if m.isPlatform(authenticationv1.UserInfo{Username: "root", Groups: []string{"system:masters"}}) {
		t.Fatal("an empty group list still names system:masters")
	}
	if !m.isPlatform(authenticationv1.UserInfo{Username: "system:serviceaccount:cozy-fluxcd:helm-controller"}) {
		t.Fatal("the configured user is not a platform identity")
	}
	conds := m.valuesMatchConditions()
	if !strings.Contains(conds[1].Expression, `["system:serviceaccount:cozy-fluxcd:helm-controller"]`) || !strings.Contains(conds[1].Expression, "g in []") {
		t.Fatalf("match condition %q does not name the configured identities", conds[1].Expression)
	}
}

func TestApplicationLabelCannotBeRemoved(t *testing.T) {
	m := &Module{opts: Options{PlatformUsers: DefaultPlatformUsers, PlatformGroups: DefaultPlatformGroups},
		view: view{classes: testClasses, tenants: memTenants{}}}
	raw := func(labels map[string]any) runtime.RawExtension {
		b, err := json.Marshal(helmRelease(nil, labels))
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: b}
	}
	app := map[string]any{applicationKindLabel: "Postgres"}
	update := func(user string, before, after map[string]any) admission.Response {
		return m.admitRelease(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			UID: "u", Operation: admissionv1.Update, Namespace: "tenant-a", Name: "app",
			UserInfo: authenticationv1.UserInfo{Username: user}, OldObject: raw(before), Object: raw(after),
		}})
	}
	resp := update("alice", app, map[string]any{classLabel: "gpu"})
	if resp.Allowed || !strings.Contains(resp.Result.Message, `user "alice" may not remove the label apps.cozystack.io/application.kind`) {
		t.Fatalf("the application label was removed: %+v", resp.Result)
	}
	if resp := update(DefaultPlatformUsers[0], app, nil); !resp.Allowed {
		t.Fatalf("the platform could not remove the label: %v", resp.Result.Message)
	}
	// A release that never was an application's is left alone.
	resp = update("alice", nil, map[string]any{classLabel: "gpu"})
	if !resp.Allowed || len(resp.Patches) != 0 {
		t.Fatalf("a release of no application was changed: %+v %v", resp.Result, resp.Patches)
	}
}
