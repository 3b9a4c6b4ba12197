package ondemand

import "github.com/gatehouse-dev/gatehouse/internal/configcheck/render"

// inProcess compiles templates to render in the test process: these tests
// judge what on-demand stores fetch, not the worker pool.
func inProcess(templates render.Templates, engine string) (render.Renderer, error) {
	e, err := render.NewEngine(engine)
	if err != nil {
		return nil, err
	}
	return e.Compile(templates)
}
