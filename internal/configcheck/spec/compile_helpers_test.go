package spec

import (
	"encoding/json"
	"os"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// inProcess compiles templates to render in the test process: unit tests
// judge renderings, not the worker pool (renderproc has its own tests, and
// the e2e tests run the real pool).
func inProcess(templates render.Templates, engine string) (render.Renderer, error) {
	e, err := render.NewEngine(engine)
	if err != nil {
		return nil, err
	}
	return e.Compile(templates)
}

const exampleConfig = "../../../examples/configcheck/config.yaml"

// exampleYAML is the example config's text.
func exampleYAML(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(exampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// loadExample decodes the example config strictly, as the offline CLI does.
func loadExample(t *testing.T) *gatehousev1alpha1.HAProxyTemplateConfig {
	t.Helper()
	cfg := &gatehousev1alpha1.HAProxyTemplateConfig{}
	if err := yaml.UnmarshalStrict(exampleYAML(t), cfg); err != nil {
		t.Fatalf("the example config does not decode strictly: %v", err)
	}
	return cfg
}

func rawJSON(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }

// minimalSpec is a config with one watched resource and a template.
func minimalSpec() *gatehousev1alpha1.HAProxyTemplateConfigSpec {
	return &gatehousev1alpha1.HAProxyTemplateConfigSpec{
		WatchedResources: map[string]gatehousev1alpha1.WatchedResource{
			"ingresses": {APIVersion: "networking.k8s.io/v1", Resources: "ingresses"},
		},
		HAProxyConfig: gatehousev1alpha1.Template{Template: "global\n"},
	}
}

// object decodes a JSON object for a test case.
func object(t *testing.T, s string) map[string]any {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal([]byte(s), &obj); err != nil {
		t.Fatalf("bad test object %s: %v", s, err)
	}
	return obj
}
