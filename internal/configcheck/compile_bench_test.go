package configcheck

import (
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
)

// BenchmarkHapticCompile compiles haptic's chart config (testdata/haptic,
// Scriggo) three ways in each iteration, and reports the second and third
// against the first, measured in the same run:
//
//	go test ./internal/configcheck -run '^$' -bench HapticCompile -benchtime 3x
//
// The first, the baseline ("cold-ms"), compiles in process from nothing
// learned: one build per repaired expression. The second
// ("learned-x-cold") compiles in process from what the first learned, as
// a second render worker does. The third ("worker-x-cold") compiles in a
// render worker of a new pool, from nothing learned, the pool started and
// closed around it: what a config's first compile costs, confined, on one
// core at nice 10.
func BenchmarkHapticCompile(b *testing.B) {
	cfgSpec, extras, errs := spec.FromHaptic(&hapticTestdata(b).Spec)
	if len(errs) > 0 {
		b.Fatal(errs.ToAggregate())
	}
	templates := spec.TemplatesOf(cfgSpec, extras.PostProcessing)
	var cold, learnedTime, worker time.Duration
	for b.Loop() {
		start := time.Now()
		_, learned, err := render.CompileLearned(spec.HapticDefaultEngine, templates, nil)
		if err != nil {
			b.Fatal(err)
		}
		cold += time.Since(start)

		start = time.Now()
		if _, _, err := render.CompileLearned(spec.HapticDefaultEngine, templates, learned); err != nil {
			b.Fatal(err)
		}
		learnedTime += time.Since(start)

		start = time.Now()
		pool, err := newRenderPool(Options{}.withDefaults())
		if err != nil {
			b.Fatal(err)
		}
		if _, err := pool.Compile(b.Context(), templates, spec.HapticDefaultEngine); err != nil {
			b.Fatal(err)
		}
		_ = pool.Close()
		worker += time.Since(start)
	}
	b.ReportMetric(float64(cold.Milliseconds())/float64(b.N), "cold-ms")
	b.ReportMetric(float64(learnedTime)/float64(cold), "learned-x-cold")
	b.ReportMetric(float64(worker)/float64(cold), "worker-x-cold")
}
