package configcheck

import (
	"context"
	"math/rand/v2"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/authz"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
	"github.com/gatehouse-dev/gatehouse/internal/trigger"
)

// accessController checks each config's access (authz.CheckAccess) on a
// workqueue, on every replica: each replica's stores are filled by it.
type accessController struct {
	m          *Module
	controller controller.Controller

	// triggers queues the configs whose access to check, once the
	// controller runs; it starts with every config.
	triggers *trigger.Source[reconcile.Request]
}

func newAccessController(m *Module) (*accessController, error) {
	a := &accessController{m: m}
	c, err := m.host.NewController("HAProxyTemplateConfigAccess", controller.Options{
		Reconciler:         a,
		NeedLeaderElection: ptr.To(false),
		RateLimiter:        workqueue.DefaultTypedControllerRateLimiter[reconcile.Request](),
	})
	if err != nil {
		return nil, err
	}
	a.triggers = trigger.New(m.allConfigRequests)
	err = c.Watch(a.triggers)
	if err != nil {
		return nil, err
	}
	a.controller = c
	return a, nil
}

// trigger asks for key's access to be checked.
func (a *accessController) trigger(key spec.Key) {
	if a == nil {
		return
	}
	a.triggers.Add(key.Request())
}

// namespaceChanged checks again every config whose selection may change.
func (a *accessController) namespaceChanged() {
	for _, st := range a.m.allStates() {
		if st.needsNamespaceChecks() {
			a.trigger(st.key)
		}
	}
}

// accessDeadline bounds one config's check.
const accessDeadline = 30 * time.Second

func (a *accessController) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	m := a.m
	st := m.state(spec.KeyOfRequest(req))
	if st == nil || st.compiled == nil {
		return reconcile.Result{}, nil
	}
	noAuthor := st.noAuthor
	if st.hasAuthor {
		noAuthor = m.keepAuthorRecordCurrent(ctx, st)
	}
	var access *authz.Access
	if noAuthor != "" {
		access = &authz.Access{Outputs: noAuthor + authz.ClaimHint}
	} else {
		ctx, cancel := context.WithTimeout(ctx, accessDeadline)
		defer cancel()
		reqs := authz.Requirements(st.key, st.compiled, m.accessTargets(st.compiled), st.certs)
		var err error
		access, err = authz.CheckAccess(ctx, st.author.Username, reqs, m.access.Reviewer(st.author), m.selectedNamespaces)
		if err != nil {
			return reconcile.Result{}, err
		}
	}
	old := st.setAccess(access)
	for name, f := range st.feeds {
		if f != nil && !authz.SameReach(old, access, name) {
			f.resync(logf.IntoContext(ctx, logf.FromContext(ctx).WithValues("config", st.key)))
		}
	}
	m.publisher.trigger(st.key)
	return reconcile.Result{RequeueAfter: recheckAfter(m.opts.AccessRecheck)}, nil
}

// recheckAfter is interval less up to a tenth, at random, so that the
// configs loaded together at a start do not all ask again at one moment.
func recheckAfter(interval time.Duration) time.Duration {
	return interval - rand.N(interval/10+1)
}
