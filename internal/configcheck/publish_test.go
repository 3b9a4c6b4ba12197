package configcheck

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/output"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

func TestNotOwned(t *testing.T) {
	cfg := &gatehousev1alpha1.HAProxyTemplateConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "x", UID: "uid-x"}}
	ref := func(apiVersion, kind, name, uid string, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(uid), Controller: ptr.To(controller)}
	}
	ours := ref("gatehouse.dev/v1alpha1", "HAProxyTemplateConfig", "x", "uid-x", true)
	managed := map[string]string{output.ManagedByLabel: "gatehouse"}
	cases := []struct {
		name   string
		labels map[string]string
		refs   []metav1.OwnerReference
		// want is a part of the reason ("" when it is the config's).
		want string
	}{
		{"Gatehouse's, with others' labels and owners beside", map[string]string{output.ManagedByLabel: "gatehouse", "team": "a"},
			[]metav1.OwnerReference{ref("v1", "ConfigMap", "other", "uid-o", false), ours}, ""},
		{"made by someone else", nil, nil, "no controller ownerReference"},
		{"made by someone else, with Gatehouse's labels", map[string]string{output.ManagedByLabel: "gatehouse", output.ConfigLabel: "x"}, nil, "no controller ownerReference"},
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
			got := output.NotOwned(obj, cfg)
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
	err := &output.NotOwnedError{Kind: "Secret", Namespace: "team-a", Name: "x-haproxy-certs", Why: "it has no controller ownerReference"}
	const want = "Secret team-a/x-haproxy-certs already exists and is not this config's (it has no controller ownerReference): Gatehouse does not write to or adopt it, so nothing is published; delete or rename that Secret, or rename the config"
	if err.Error() != want {
		t.Fatalf("message:\n  %s\nwant:\n  %s", err, want)
	}
}

// TestRenderingsThatDoNotFitAreRefusedBeforeAnyWrite: the API server takes
// at most 1 MiB of values in a ConfigMap or a Secret. A rendering over it is
// refused by size before anything is read or written (write's first step),
// naming the object, its size, the limit and the largest keys; one exactly
// at the limit is written.
func TestRenderingsThatDoNotFitAreRefusedBeforeAnyWrite(t *testing.T) {
	const limit = 1 << 20
	atLimit := render.Output{HAProxyConfig: strings.Repeat("#", limit-10), Maps: map[string]string{"hosts.map": strings.Repeat("h", 10)}}
	if err := output.Of(atLimit).Fits("lb", "edge"); err != nil {
		t.Fatalf("a rendering of exactly 1 MiB of values was refused: %v", err)
	}

	over := render.Output{
		HAProxyConfig: strings.Repeat("#", limit-10),
		Maps:          map[string]string{"hosts.map": strings.Repeat("h", 10), "big.map": strings.Repeat("b", 7)},
		Files:         map[string]string{"a.txt": "a", "b.txt": "b"},
	}
	err := output.Of(over).Fits("lb", "edge")
	var big *output.TooLargeError
	if !errors.As(err, &big) {
		t.Fatalf("a rendering over 1 MiB: got %v, want a *tooLargeError", err)
	}
	want := "the rendering does not fit in ConfigMap lb/edge-haproxy: its keys hold 1048585 bytes (haproxy.cfg 1048566 bytes, map.hosts.map 10 bytes, map.big.map 7 bytes), over the 1048576 bytes the API server accepts in one ConfigMap; " +
		"nothing was written and the last accepted rendering stays published. Split the config into several that each render less"
	if !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("message:\n%s\nwant it to start with:\n%s", err, want)
	}

	// The Secret has a limit of its own: certificates never count toward
	// the ConfigMap, and their total is checked on its own.
	certs := render.Output{HAProxyConfig: "global\n", Certs: map[string]string{"a.pem": strings.Repeat("a", limit/2), "b.pem": strings.Repeat("b", limit/2+1)}}
	err = output.Of(certs).Fits("lb", "edge")
	if !errors.As(err, &big) || big.Kind != "Secret" || big.Name != "edge-haproxy-certs" || big.Size != limit+1 {
		t.Fatalf("certificates over 1 MiB: got %v, want the Secret edge-haproxy-certs refused at %d bytes", err, limit+1)
	}
	if err := output.Of(render.Output{HAProxyConfig: "global\n", Certs: map[string]string{"a.pem": strings.Repeat("a", limit)}}).Fits("lb", "edge"); err != nil {
		t.Fatalf("certificates of exactly 1 MiB beside a small ConfigMap were refused: %v", err)
	}
}
