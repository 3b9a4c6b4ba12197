package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr/testr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/catalogue"
	"github.com/gatehouse-dev/gatehouse/internal/testenv"
	"github.com/gatehouse-dev/gatehouse/internal/webhookconfig"
)

// TestGeneratedRBACIsEnough runs Gatehouse, every module on, as a user that
// holds only the roles controller-gen generated into config/rbac/role.yaml.
// A missing verb leaves an informer unable to list, and /readyz never passes.
func TestGeneratedRBACIsEnough(t *testing.T) {
	ctx := context.Background()
	c := controlPlane.Client
	fixedNamespace(t, "gatehouse-system")
	const user = "gatehouse-rbac-test"

	root, _ := testenv.RepoRoot()
	data, err := os.ReadFile(filepath.Join(root, "config/rbac/role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := testenv.YAMLDocuments(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range docs {
		obj := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &obj.Object); err != nil || len(obj.Object) == 0 {
			continue
		}
		obj.SetName(obj.GetName() + "-rbac-test")
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
		ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: obj.GetKind(), Name: obj.GetName()}
		var binding interface{ GetName() string }
		switch obj.GetKind() {
		case "ClusterRole":
			b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: obj.GetName()}, Subjects: subject, RoleRef: ref}
			err, binding = c.Create(ctx, b), b
		case "Role":
			b := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: obj.GetNamespace(), Name: obj.GetName()}, Subjects: subject, RoleRef: ref}
			err, binding = c.Create(ctx, b), b
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("bind %s: %v", binding.GetName(), err)
		}
	}

	restricted, err := controlPlane.Env.AddUser(envtest.User{Name: user}, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]app.ModuleConfig{}
	for _, m := range catalogue.All() {
		names[m.Name()] = app.ModuleConfig{Enabled: true}
	}
	cp := *controlPlane
	cp.Config = restricted.Config()
	g, err := testenv.StartGatehouse(ctx, &cp, t.TempDir(), app.Options{
		Log: testr.New(t), Namespace: "gatehouse-system", Catalogue: catalogue.All(), Modules: names,
	})
	if err != nil {
		t.Fatalf("gatehouse with only the generated RBAC: %v", err)
	}
	if err := g.Stop(); err != nil {
		t.Error(err)
	}
	_ = c.Delete(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhookconfig.ValidatingName}})
}
