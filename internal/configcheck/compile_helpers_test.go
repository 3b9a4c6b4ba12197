package configcheck

import "github.com/gatehouse-dev/gatehouse/internal/configcheck/render"

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
