package clustertest

import (
	"os"
	"path/filepath"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

// ScopeLabel is the namespace label a config of ExampleConfig's watches
// by: its value is the scope of one test.
const ScopeLabel = "gatehouse.test/configcheck"

// ExampleConfig is examples/configcheck's config, watching only the
// namespaces labelled with a scope of its own that no namespace carries
// yet: a config outlives its test until its namespace is deleted, and one
// watching every namespace would judge the next tests' Ingresses. A test
// that means it to watch something scopes it (ScopeTo) or labels a
// namespace with its scope.
func ExampleConfig(t testing.TB) *gatehousev1alpha1.HAProxyTemplateConfig {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err == nil {
		var data []byte
		data, err = os.ReadFile(filepath.Join(root, "examples", "configcheck", "config.yaml"))
		if err == nil {
			cfg := &gatehousev1alpha1.HAProxyTemplateConfig{}
			if err = yaml.UnmarshalStrict(data, cfg); err == nil {
				ScopeTo(cfg, "cc-"+RandSuffix())
				return cfg
			}
		}
	}
	t.Fatal(err)
	return nil
}

// ScopeTo has cfg watch the namespaces labelled ScopeLabel=scope only.
func ScopeTo(cfg *gatehousev1alpha1.HAProxyTemplateConfig, scope string) {
	for name, w := range cfg.Spec.WatchedResources {
		w.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{ScopeLabel: scope}}
		cfg.Spec.WatchedResources[name] = w
	}
}

// Unscoped has cfg watch every namespace, for a benchmark that owns the
// cluster.
func Unscoped(cfg *gatehousev1alpha1.HAProxyTemplateConfig) {
	for name, w := range cfg.Spec.WatchedResources {
		w.NamespaceSelector = nil
		cfg.Spec.WatchedResources[name] = w
	}
}

// Ingress is an Ingress of class in namespace routing host's / to
// service:port, as the example config renders it.
func Ingress(namespace, name, class, host, service string, port int32) *networkingv1.Ingress {
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: networkingv1.IngressSpec{
			IngressClassName: ptr.To(class),
			Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix), Backend: networkingv1.IngressBackend{
					Service: &networkingv1.IngressServiceBackend{Name: service, Port: networkingv1.ServiceBackendPort{Number: port}},
				}}},
			}}}},
		},
	}
}
