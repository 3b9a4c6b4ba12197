package configcheck

import (
	"context"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/suite"
)

// runTests runs c's embedded tests within timeout.
func (m *Module) runTests(ctx context.Context, c *compiled, timeout time.Duration) (suite.Report, error) {
	return m.runTestsKeeping(ctx, c, timeout, nil)
}

// runTestsKeeping is runTests handing each test's successful rendering to
// onRendered (when set), in turn, so that it can be checked further without
// being rendered again (unverified.go).
func (m *Module) runTestsKeeping(ctx context.Context, c *compiled, timeout time.Duration, onRendered func(test string, out render.Output)) (suite.Report, error) {
	if len(c.tests) == 0 {
		return suite.Report{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	runner := m.testRunner(c)
	runner.OnRendered = onRendered
	return runner.Run(ctx, c.tests, "")
}

func (m *Module) testRunner(c *compiled) *suite.Runner {
	indexBy := make(map[string][]string, len(c.watched))
	for name, w := range c.watched {
		indexBy[name] = w.indexBy
	}
	return &suite.Runner{Renderer: c.renderer, IndexBy: indexBy, ExtraContext: c.extraContext, Check: m.checkFunc(), Dialect: c.dialect}
}

func (m *Module) checkFunc() suite.CheckFunc {
	return func(ctx context.Context, out render.Output) (bool, string, error) {
		v, err := m.checker.Check(ctx, out)
		if err != nil {
			return false, "", err
		}
		countCheck(v)
		return v.Valid, v.Message, nil
	}
}
