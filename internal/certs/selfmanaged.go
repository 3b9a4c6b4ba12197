package certs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Defaults of SelfManagedOptions. The CA is renewed long before it expires
// (the rotation needs only two grace periods, but a failing leader should be
// noticed months ahead), and the serving certificate renews well within the
// CA's lifetime.
const (
	DefaultCAValidity       = 3 * 365 * 24 * time.Hour
	DefaultCARenewBefore    = 180 * 24 * time.Hour
	DefaultLeafValidity     = 90 * 24 * time.Hour
	DefaultLeafRenewBefore  = 30 * 24 * time.Hour
	DefaultRotationGrace    = 10 * time.Minute
	DefaultMaxCheckInterval = time.Hour
)

// SelfManagedOptions configures NewSelfManaged. Zero durations take the
// defaults above; tests set them to seconds.
type SelfManagedOptions struct {
	// Namespace and Name are the kubernetes.io/tls Secret Gatehouse creates
	// and rotates (--cert-secret).
	Namespace, Name string
	// DNSNames are the serving certificate's names, the first one also its
	// common name; in-cluster, ServiceDNSNames(service, namespace).
	DNSNames []string

	// CAValidity is a new CA's lifetime; CARenewBefore is how long before
	// its expiry a rotation to the next CA starts.
	CAValidity, CARenewBefore time.Duration
	// LeafValidity is a serving certificate's lifetime (never beyond its
	// CA's); LeafRenewBefore is how long before its expiry it is renewed.
	LeafValidity, LeafRenewBefore time.Duration
	// Grace is how long each phase of a CA rotation waits for the previous
	// one to take effect everywhere: the new bundle to reach the webhook
	// configurations before the serving certificate moves to the new CA, and
	// every replica to serve the new certificate before the old CA leaves
	// the bundle. It must cover the webhook configuration reconciler's
	// retries and the Secret's propagation to every replica.
	Grace time.Duration
	// MaxCheckInterval bounds the rotator's sleep between checks.
	MaxCheckInterval time.Duration
}

func (o *SelfManagedOptions) setDefaults() {
	for _, d := range []struct {
		field *time.Duration
		def   time.Duration
	}{
		{&o.CAValidity, DefaultCAValidity},
		{&o.CARenewBefore, DefaultCARenewBefore},
		{&o.LeafValidity, DefaultLeafValidity},
		{&o.LeafRenewBefore, DefaultLeafRenewBefore},
		{&o.Grace, DefaultRotationGrace},
		{&o.MaxCheckInterval, DefaultMaxCheckInterval},
	} {
		if *d.field == 0 {
			*d.field = d.def
		}
	}
}

func (o *SelfManagedOptions) validate() error {
	switch {
	case o.Namespace == "" || o.Name == "":
		return errors.New("self-managed certificates need the Secret's namespace and name")
	case len(o.DNSNames) == 0:
		return errors.New("self-managed certificates need at least one DNS name")
	case o.CARenewBefore >= o.CAValidity:
		return fmt.Errorf("CA renew-before %v must be shorter than its validity %v", o.CARenewBefore, o.CAValidity)
	case o.LeafRenewBefore >= o.LeafValidity:
		return fmt.Errorf("serving certificate renew-before %v must be shorter than its validity %v", o.LeafRenewBefore, o.LeafValidity)
	case o.LeafRenewBefore > o.CARenewBefore:
		// A serving certificate is cut at its CA's expiry; renewing it
		// before the CA would reissue it on every check.
		return fmt.Errorf("serving certificate renew-before %v must not exceed the CA's %v", o.LeafRenewBefore, o.CARenewBefore)
	case 2*o.Grace >= o.CARenewBefore:
		// The old CA must outlive both grace periods of the overlap.
		return fmt.Errorf("CA renew-before %v must exceed two grace periods (%v)", o.CARenewBefore, o.Grace)
	}
	return nil
}

// ServiceDNSNames are the names a Service is called by in-cluster.
func ServiceDNSNames(service, namespace string) []string {
	return []string{service + "." + namespace + ".svc", service + "." + namespace + ".svc.cluster.local"}
}

// SelfManaged serves a Secret that Gatehouse creates and rotates itself. It
// is a Source and a CABundler on every replica; its Rotator, which writes
// the Secret, runs on the leader only.
type SelfManaged struct {
	*Secret
	rotator *Rotator
}

// Rotator is the leader-elected writer of the self-managed Secret.
type Rotator struct {
	opts   SelfManagedOptions
	client client.Client
	poked  chan struct{}
}

var _ manager.LeaderElectionRunnable = (*Rotator)(nil)

// NewSelfManaged makes sure the Secret holds a servable certificate and
// loads it. Every replica may create the Secret, or repair one that holds
// nothing servable: the API server lets only one create or resourceVersion-
// checked update win, and the others read the winner's. Rotation itself is
// the Rotator's, on the leader. Both log through the logger in ctx
// (log.FromContext): the Secret source the one NewSelfManaged is given, the
// Rotator the one its Start is given.
func NewSelfManaged(ctx context.Context, cfg *rest.Config, opts SelfManagedOptions) (*SelfManaged, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	conn, err := newAPIConn(cfg)
	if err != nil {
		return nil, err
	}
	r := &Rotator{opts: opts, client: conn.client, poked: make(chan struct{}, 1)}
	if err := r.bootstrap(ctx); err != nil {
		return nil, err
	}
	src, err := newSecret(ctx, conn, opts.Namespace, opts.Name, logf.FromContext(ctx))
	if err != nil {
		return nil, err
	}
	src.onEvent = r.poke
	return &SelfManaged{Secret: src, rotator: r}, nil
}

// Rotator is the Runnable to add to the manager; it needs leader election.
func (s *SelfManaged) Rotator() *Rotator { return s.rotator }

// RequestCARotation asks the leader to start a CA rotation now, through the
// Secret's gatehouse.dev/rotate-ca annotation; any replica may call it.
func (s *SelfManaged) RequestCARotation(ctx context.Context) error {
	c, key := s.rotator.client, s.rotator.key()
	for {
		secret := &corev1.Secret{}
		if err := c.Get(ctx, key, secret); err != nil {
			return err
		}
		if secret.Annotations == nil {
			secret.Annotations = map[string]string{}
		}
		secret.Annotations[AnnotationRotateCA] = time.Now().UTC().Format(time.RFC3339)
		err := c.Update(ctx, secret)
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}

func (r *Rotator) NeedLeaderElection() bool { return true }

func (r *Rotator) key() client.ObjectKey {
	return client.ObjectKey{Namespace: r.opts.Namespace, Name: r.opts.Name}
}

// logger is the rotator's logger, from the context it runs in
// (controller-runtime's log.FromContext), with the Secret it writes.
func (r *Rotator) logger(ctx context.Context) logr.Logger {
	return logf.FromContext(ctx).WithName("rotator").WithValues("secret", r.opts.Namespace+"/"+r.opts.Name)
}

// get reads the Secret live, nil when it does not exist.
func (r *Rotator) get(ctx context.Context) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	if err := r.client.Get(ctx, r.key(), secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return secret, nil
}

// write creates next by name, or updates secret (resourceVersion-checked).
func (r *Rotator) write(ctx context.Context, secret, next *corev1.Secret) error {
	if secret == nil {
		return createByName(ctx, r.client, next)
	}
	return r.client.Update(ctx, next)
}

func (r *Rotator) poke() {
	select {
	case r.poked <- struct{}{}:
	default:
	}
}

func (r *Rotator) bootstrap(ctx context.Context) error {
	ref := "Secret " + r.opts.Namespace + "/" + r.opts.Name
	for attempt := 0; ; attempt++ {
		if attempt == 10 {
			return fmt.Errorf("bootstrap certificate %s: too many concurrent writers", ref)
		}
		secret, err := r.get(ctx)
		if err != nil {
			return fmt.Errorf("read certificate %s: %w", ref, err)
		} else if secret != nil && readMaterial(secret.Data).issuerOf(secret.Data, r.opts.DNSNames[0], time.Now()) != nil {
			return nil
		}
		step, next, _, err := planRotation(secret, time.Now(), &r.opts)
		if err != nil {
			return err
		}
		err = r.write(ctx, secret, next)
		switch {
		case err == nil:
			rotationSteps.WithLabelValues(string(step), "success").Inc()
			r.logger(ctx).Info("certificate Secret bootstrapped", "step", step)
			return nil
		case apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err):
			continue
		default:
			rotationSteps.WithLabelValues(string(step), "error").Inc()
			return fmt.Errorf("write certificate %s: %w", ref, err)
		}
	}
}

// Start rotates until ctx ends: it re-plans after every write, every event
// on the Secret, and when the plan says something falls due.
func (r *Rotator) Start(ctx context.Context) error {
	log := r.logger(ctx)
	log.Info("certificate rotator started")
	backoff := time.Duration(0)
	for {
		wake, err := r.step(ctx)
		if err != nil && ctx.Err() != nil {
			// Stopped while writing (leadership lost, shutdown): not a
			// failure to retry or to log as one.
			return nil
		}
		if err != nil {
			backoff = min(max(2*backoff, 500*time.Millisecond), time.Minute)
			log.Error(err, "certificate rotation; will retry", "in", backoff)
			wake = time.Now().Add(backoff)
		} else {
			backoff = 0
		}
		wait := min(time.Until(wake), r.opts.MaxCheckInterval)
		if wait <= 0 {
			continue
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		case <-r.poked:
			timer.Stop()
		}
	}
}

// step makes at most one write and returns when to look again.
func (r *Rotator) step(ctx context.Context) (time.Time, error) {
	secret, err := r.get(ctx)
	if err != nil {
		return time.Time{}, err
	}
	step, next, wake, err := planRotation(secret, time.Now(), &r.opts)
	if err != nil || step == StepNone {
		return wake, err
	}
	err = r.write(ctx, secret, next)
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		// Someone wrote in between; plan again from what they wrote.
		return time.Now(), nil
	}
	if err != nil {
		rotationSteps.WithLabelValues(string(step), "error").Inc()
		return time.Time{}, fmt.Errorf("%s: write Secret: %w", step, err)
	}
	rotationSteps.WithLabelValues(string(step), "success").Inc()
	r.logger(ctx).Info("certificate rotation step written", "step", step)
	return time.Now(), nil
}

// FieldManager is the field manager of the Secret Gatehouse creates.
const FieldManager = "gatehouse"

// createByName creates the Secret with a server-side apply rather than a
// POST: the API server authorizes the create an apply makes with the
// Secret's name, so Gatehouse's RBAC can name the one Secret it may create
// (a POST names none, and would need create on every Secret of the
// namespace). Unlike a POST, an apply also writes over a Secret another
// replica created meanwhile; that is harmless at bootstrap, where both
// write a whole fresh CA and certificate and every replica serves whatever
// the Secret holds last.
func createByName(ctx context.Context, c client.Client, secret *corev1.Secret) error {
	obj := secret.DeepCopy()
	obj.ResourceVersion, obj.ManagedFields = "", nil
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	unstructured.RemoveNestedField(u, "metadata", "creationTimestamp")
	u["apiVersion"], u["kind"] = "v1", "Secret"
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: u}),
		client.FieldOwner(FieldManager), client.ForceOwnership)
}
