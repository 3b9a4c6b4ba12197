package module

import "context"

// Failer is implemented by a module whose own objects should say that it
// could not start. A module whose Setup returns an error (or panics) fails
// alone: the host discards everything Setup registered (caches,
// controllers, runnables, followed kinds, run-time webhooks), serves none
// of its webhooks, writes none of them into the webhook configurations,
// and reports it in /readyz and gatehouse_module_ready; every other module
// serves. Then, if the module is a Failer, the host calls Failed with a
// fresh Host and the error, so that the module can say why on its objects
// (configcheck: a ModuleReady condition on every HAProxyTemplateConfig).
//
// Failed must not depend on what failed: it runs the least the message
// needs (a cache started with StartCache, which does not gate /readyz,
// and a controller, which runs on the leader unless it says otherwise:
// the leader writes the webhook configurations, so its view is the one
// the objects should state). An error from Failed is logged; the module
// stays failed and the others serve.
type Failer interface {
	Failed(ctx context.Context, host Host, reason error) error
}
