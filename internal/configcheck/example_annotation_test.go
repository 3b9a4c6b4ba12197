package configcheck

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
)

// TestExampleAcceptsOnlyABackendNameAnnotation: the example prints the
// annotation haproxy.gatehouse.dev/backend-name, which the Ingress's author
// writes. The engine refuses a line break in any printed value; within a
// line a space or a '#' would still change the directive, so the example
// accepts a haproxy identifier only, and says so.
func TestExampleAcceptsOnlyABackendNameAnnotation(t *testing.T) {
	cfg := loadExample(t)
	c, errs := spec.Compile(&cfg.Spec, inProcess)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	renderExample := func(annotation string) (render.Output, error) {
		t.Helper()
		metadata := map[string]any{"namespace": "app", "name": "web"}
		if annotation != "" {
			metadata["annotations"] = map[string]any{"haproxy.gatehouse.dev/backend-name": annotation}
		}
		objects := map[string][]map[string]any{
			"services": {{"metadata": map[string]any{"namespace": "app", "name": "api"}, "spec": map[string]any{"clusterIP": "10.0.0.10"}}},
			"ingresses": {{"metadata": metadata, "spec": map[string]any{"ingressClassName": "haproxy", "rules": []any{map[string]any{
				"host": "a.example",
				"http": map[string]any{"paths": []any{map[string]any{"path": "/", "backend": map[string]any{
					"service": map[string]any{"name": "api", "port": map[string]any{"number": int64(80)}}}}}},
			}}}}},
		}
		data := render.Data{Resources: map[string]render.Store{}}
		for name, objs := range objects {
			store, err := render.NewMemoryStore(c.Watched[name].Indexer, objs...)
			if err != nil {
				t.Fatal(err)
			}
			data.Resources[name] = store
		}
		return c.Renderer.Render(context.Background(), data)
	}

	for annotation, backend := range map[string]string{"": "be_app_api_80", "be_custom-1.v2": "be_custom-1.v2"} {
		output, err := renderExample(annotation)
		if err != nil || !strings.Contains(output.HAProxyConfig, "\nbackend "+backend+"\n") || !strings.Contains(output.Maps["hosts.map"], "a.example "+backend+"\n") {
			t.Errorf("annotation %q: %v\n%s%s", annotation, err, output.HAProxyConfig, output.Maps["hosts.map"])
		}
	}
	for _, annotation := range []string{"be_x acl leak src -f /etc/passwd", "be_x#", "be_x\tacl", "be_x\nacl leak src -f /etc/passwd", "be_x\u2028acl", "be_é"} {
		_, err := renderExample(annotation)
		var failErr *render.FailError
		if !errors.As(err, &failErr) || !strings.Contains(failErr.Message,
			"Ingress app/web: annotation haproxy.gatehouse.dev/backend-name "+strconv.Quote(annotation)+" is not a backend name: use letters, digits, '.', '_' and '-' only") {
			t.Errorf("annotation %q: err = %v, want the example's refusal", annotation, err)
		}
	}
}
