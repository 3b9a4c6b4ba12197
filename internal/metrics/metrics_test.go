package metrics

import (
	"testing"

	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/gatehouse-dev/gatehouse/internal/version"
)

func TestBuildInfoNamesThisBuild(t *testing.T) {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := version.Get()
	for _, f := range families {
		if f.GetName() != "gatehouse_build_info" {
			continue
		}
		m := f.GetMetric()[0]
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if m.GetGauge().GetValue() != 1 || labels["version"] != want.Version || labels["revision"] != want.Revision || labels["goversion"] != want.GoVersion {
			t.Fatalf("gatehouse_build_info %v = %v, want 1 with %+v", labels, m.GetGauge().GetValue(), want)
		}
		return
	}
	t.Fatal("no gatehouse_build_info")
}
