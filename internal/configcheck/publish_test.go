package configcheck

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
)

func TestNotOwned(t *testing.T) {
	cfg := &gatehousev1alpha1.HAProxyTemplateConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "x", UID: "uid-x"}}
	ref := func(apiVersion, kind, name, uid string, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(uid), Controller: ptr.To(controller)}
	}
	ours := ref("gatehouse.dev/v1alpha1", "HAProxyTemplateConfig", "x", "uid-x", true)
	managed := map[string]string{managedByLabel: "gatehouse"}
	cases := []struct {
		name   string
		labels map[string]string
		refs   []metav1.OwnerReference
		// want is a part of the reason ("" when it is the config's).
		want string
	}{
		{"Gatehouse's, with others' labels and owners beside", map[string]string{managedByLabel: "gatehouse", "team": "a"},
			[]metav1.OwnerReference{ref("v1", "ConfigMap", "other", "uid-o", false), ours}, ""},
		{"made by someone else", nil, nil, "no controller ownerReference"},
		{"made by someone else, with Gatehouse's labels", map[string]string{managedByLabel: "gatehouse", configLabel: "x"}, nil, "no controller ownerReference"},
		{"owned by the config, not as controller", managed, []metav1.OwnerReference{ref("gatehouse.dev/v1alpha1", "HAProxyTemplateConfig", "x", "uid-x", false)}, "no controller ownerReference"},
		{"controlled by an earlier config of the same name", managed,
			[]metav1.OwnerReference{ref("gatehouse.dev/v1alpha1", "HAProxyTemplateConfig", "x", "uid-old", true)}, "(uid uid-old), not HAProxyTemplateConfig x (uid uid-x)"},
		{"controlled by something else", managed, []metav1.OwnerReference{ref("apps/v1", "Deployment", "web", "uid-d", true)}, "its controller is Deployment web"},
		{"the config's UID under another kind", managed, []metav1.OwnerReference{ref("v1", "ConfigMap", "x", "uid-x", true)}, "its controller is ConfigMap x"},
		{"controlled by the config, without the label", map[string]string{"app.kubernetes.io/managed-by": "helm"},
			[]metav1.OwnerReference{ours}, "lacks the label app.kubernetes.io/managed-by=gatehouse"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "x-haproxy-certs", Labels: tc.labels, OwnerReferences: tc.refs}}
			got := notOwned(obj, cfg)
			if tc.want == "" {
				if got != "" {
					t.Fatalf("not the config's: %s", got)
				}
				return
			}
			if got == "" || !strings.Contains(got, tc.want) {
				t.Fatalf("reason %q, want one containing %q", got, tc.want)
			}
		})
	}
}

func TestNotOwnedErrorSaysHowToProceed(t *testing.T) {
	err := &notOwnedError{kind: "Secret", namespace: "team-a", name: "x-haproxy-certs", why: "it has no controller ownerReference"}
	const want = "Secret team-a/x-haproxy-certs already exists and is not this config's (it has no controller ownerReference): Gatehouse does not write to or adopt it, so nothing is published; delete or rename that Secret, or rename the config"
	if err.Error() != want {
		t.Fatalf("message:\n  %s\nwant:\n  %s", err, want)
	}
}
