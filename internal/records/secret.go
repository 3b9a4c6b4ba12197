package records

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// NewSecret keeps the keys in the Secret namespace/name (Gatehouse's own
// namespace, next to the serving certificate's): it creates it with a key
// when there is none, and reads it before it returns, so that every
// replica holds a key before it serves. Its Rotator rotates the keys on
// the leader.
func NewSecret(ctx context.Context, c client.Client, namespace, name string, opts Options) (*Store, *Rotator, error) {
	key := client.ObjectKey{Namespace: namespace, Name: name}
	read := func(ctx context.Context) ([]Key, error) {
		secret := &corev1.Secret{}
		if err := c.Get(ctx, key, secret); err != nil {
			return nil, err
		}
		return ParseKeys(secret.Data), nil
	}
	s := newStore(opts, read)
	keys, err := read(ctx)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, nil, fmt.Errorf("read records key Secret %s: %w", key, err)
	}
	if len(keys) == 0 {
		if err := bootstrap(ctx, c, namespace, name); err != nil {
			return nil, nil, fmt.Errorf("create records key Secret %s: %w", key, err)
		}
	}
	if err := s.load(ctx); err != nil {
		return nil, nil, fmt.Errorf("records key Secret %s: %w", key, err)
	}
	return s, &Rotator{client: c, key: key, opts: s.opts}, nil
}

// bootstrap adds a key to the Secret by a server-side apply (authorized by
// the Secret's name, like the serving certificate's) under a field manager
// of this replica's own: two replicas starting at once each add their key
// and neither removes the other's, so whichever key a replica signs with,
// the others find it in the Secret.
func bootstrap(ctx context.Context, c client.Client, namespace, name string) error {
	k, err := NewKey(time.Now())
	if err != nil {
		return err
	}
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		return err
	}
	secret := &corev1.Secret{Type: corev1.SecretTypeOpaque, Data: map[string][]byte{k.ID: k.Secret}}
	secret.Namespace, secret.Name = namespace, name
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(secret)
	if err != nil {
		return err
	}
	unstructured.RemoveNestedField(u, "metadata", "creationTimestamp")
	u["apiVersion"], u["kind"] = "v1", "Secret"
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: u}),
		client.FieldOwner("gatehouse-records-"+hex.EncodeToString(suffix)))
}

// Rotator adds a key every RotateEvery and drops those past Keep, on the
// leader.
type Rotator struct {
	client client.Client
	key    client.ObjectKey
	opts   Options
}

var _ manager.LeaderElectionRunnable = (*Rotator)(nil)

func (r *Rotator) NeedLeaderElection() bool { return true }

// Start rotates until ctx ends.
func (r *Rotator) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("records").WithValues("secret", r.key.String())
	backoff := time.Duration(0)
	for {
		wake, err := r.step(ctx)
		if err != nil && ctx.Err() != nil {
			return nil
		}
		if err != nil {
			backoff = min(max(2*backoff, time.Second), time.Minute)
			log.Error(err, "records key rotation; will retry", "in", backoff)
			wake = time.Now().Add(backoff)
		} else {
			backoff = 0
		}
		timer := time.NewTimer(min(max(time.Until(wake), 0), time.Hour))
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		}
	}
}

// step makes at most one write and says when to look again.
func (r *Rotator) step(ctx context.Context) (time.Time, error) {
	secret := &corev1.Secret{}
	if err := r.client.Get(ctx, r.key, secret); err != nil {
		return time.Time{}, err
	}
	keys := ParseKeys(secret.Data)
	next, changed, wake, err := Plan(keys, time.Now(), r.opts)
	if err != nil || !changed {
		return wake, err
	}
	out := secret.DeepCopy()
	for _, k := range keys {
		delete(out.Data, k.ID)
	}
	if out.Data == nil {
		out.Data = map[string][]byte{}
	}
	for _, k := range next {
		out.Data[k.ID] = k.Secret
	}
	err = r.client.Update(ctx, out)
	if apierrors.IsConflict(err) {
		return time.Now(), nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("write records key Secret: %w", err)
	}
	logf.FromContext(ctx).WithName("records").Info("records key rotated", "secret", r.key.String(), "keys", len(next))
	return time.Now(), nil
}
