package configcheck

import (
	"context"
	"fmt"
	"os"
	"testing"

	"sigs.k8s.io/yaml"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
)

// BenchmarkRenderExample1000 renders examples/configcheck with 1,000
// Ingresses, each to a Service of its own: the render phase of an admission
// at that scale.
//
//	go test ./internal/configcheck -run '^$' -bench RenderExample1000 -benchmem
func BenchmarkRenderExample1000(b *testing.B) {
	data, err := os.ReadFile("../../examples/configcheck/config.yaml")
	if err != nil {
		b.Fatal(err)
	}
	cfg := &gatehousev1alpha1.HAProxyTemplateConfig{}
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		b.Fatal(err)
	}
	c, errs := spec.Compile(&cfg.Spec, inProcess)
	if len(errs) > 0 {
		b.Fatal(errs)
	}
	var ingresses, services []map[string]any
	for i := range 1000 {
		services = append(services, map[string]any{
			"metadata": map[string]any{"namespace": "app", "name": fmt.Sprintf("svc-%04d", i)},
			"spec":     map[string]any{"clusterIP": fmt.Sprintf("10.96.%d.%d", i/250, i%250+1), "ports": []any{map[string]any{"port": int64(80)}}},
		})
		ingresses = append(ingresses, map[string]any{
			"metadata": map[string]any{"namespace": "app", "name": fmt.Sprintf("ing-%04d", i)},
			"spec": map[string]any{"ingressClassName": "haproxy", "rules": []any{map[string]any{
				"host": fmt.Sprintf("h%04d.example", i),
				"http": map[string]any{"paths": []any{map[string]any{"path": "/", "pathType": "Prefix",
					"backend": map[string]any{"service": map[string]any{"name": fmt.Sprintf("svc-%04d", i), "port": map[string]any{"number": int64(80)}}}}}},
			}}},
		})
	}
	stores := render.Data{Resources: map[string]render.Store{}}
	for name, objs := range map[string][]map[string]any{"ingresses": ingresses, "services": services} {
		s, err := render.NewMemoryStore(c.Watched[name].Indexer, objs...)
		if err != nil {
			b.Fatal(err)
		}
		stores.Resources[name] = s
	}
	b.ResetTimer()
	for range b.N {
		if _, err := c.Renderer.Render(context.Background(), stores); err != nil {
			b.Fatal(err)
		}
	}
}
