package configcheck

import (
	"context"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/metrics"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
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
	runner := m.testRunner(c)
	runner.OnRendered = onRendered
	return runner.Run(ctx, c.Tests, "")
}

func (m *Module) testRunner(c *spec.Compiled) *suite.Runner {
	indexBy := make(map[string][]string, len(c.Watched))
	for name, w := range c.Watched {
		indexBy[name] = w.IndexBy
	}
	return &suite.Runner{Renderer: c.Renderer, IndexBy: indexBy, ExtraContext: c.ExtraContext, Check: m.checkFunc(c.Dialect), Dialect: c.Dialect}
}

func (m *Module) checkFunc(dialect suite.Dialect) suite.CheckFunc {
	return func(ctx context.Context, out render.Output) (bool, string, error) {
		v, err := m.checker.Check(ctx, asChecked(out, dialect))
		if err != nil {
			return false, "", err
		}
		metrics.CountCheck(v)
		return v.Valid, v.Message, nil
	}
}

// hapticBaseDir is haptic's pathResolver.GetBaseDir(), the directory its
// templates name in "default-path origin" (the scriggo engine's
// pathResolver renders it): haptic's controller deploys there.
const hapticBaseDir = "/etc/haproxy"

// asChecked is out as the check sees it. haptic's validator rewrites
// "default-path origin <its base directory>" to its check directory
// before running haproxy; Gatehouse's check policy refuses an origin
// outside the checked directory, so for haptic's configs exactly that
// line becomes "default-path config", which names the same layout there
// (every other path haptic renders is relative: maps/, ssl/, general/).
// Any other origin stays refused. The rendering itself, which the
// assertions read, is unchanged.
func asChecked(out render.Output, dialect suite.Dialect) render.Output {
	if dialect != suite.DialectHaptic || !strings.Contains(out.HAProxyConfig, hapticBaseDir) {
		return out
	}
	lines := strings.SplitAfter(out.HAProxyConfig, "\n")
	for i, line := range lines {
		if fields := strings.Fields(line); len(fields) == 3 && fields[0] == "default-path" && fields[1] == "origin" && strings.TrimSuffix(fields[2], "/") == hapticBaseDir {
			indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
			lines[i] = indent + "default-path config\n"
		}
	}
	out.HAProxyConfig = strings.Join(lines, "")
	return out
}
