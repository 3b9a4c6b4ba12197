package configcheck

import (
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/metrics"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
)

// validityOf is a loaded config's validity: it does not compile, its tests
// could not run, they fail, or it is valid.
func validityOf(st *configState) string {
	switch {
	case st.compiled == nil:
		return metrics.ValiditySpecInvalid
	case st.invalid != "":
		return metrics.ValidityTestsNotRun
	case st.failedTests() != "":
		return metrics.ValidityTestsFailed
	}
	return metrics.ValidityValid
}

// countHapticConfigs sets hapticConfigs from the states loaded, every
// validity present (0 when none is), so that the alert has a series to
// read from the start.
func (m *Module) countHapticConfigs() {
	counts := make(map[string]int, len(metrics.HapticValidities))
	for _, st := range m.allStates() {
		if st.key.Kind == spec.HapticKind {
			counts[validityOf(st)]++
		}
	}
	for _, v := range metrics.HapticValidities {
		metrics.HapticConfigs.WithLabelValues(v).Set(float64(counts[v]))
	}
}

// HAProxyChecks counts how admissions and publications got their haproxy -c
// verdict (metrics.HAProxyChecks).
var HAProxyChecks = metrics.HAProxyChecks
