package configcheck

import (
	"context"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/judge"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/suite"
)

// runTests runs c's embedded tests within timeout.
func (m *Module) runTests(ctx context.Context, c *spec.Compiled, timeout time.Duration) (suite.Report, error) {
	return m.runTestsKeeping(ctx, c, timeout, nil)
}

// runTestsKeeping is runTests handing each test's successful rendering to
// onRendered (when set), in turn, so that it can be checked further without
// being rendered again (unverified.go).
func (m *Module) runTestsKeeping(ctx context.Context, c *spec.Compiled, timeout time.Duration, onRendered func(test string, out render.Output)) (suite.Report, error) {
	if len(c.Tests) == 0 {
		return suite.Report{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	runner := judge.TestRunner(m.checker, c)
	runner.OnRendered = onRendered
	return runner.Run(ctx, c.Tests, "")
}
