package certs

import (
	"context"
	"crypto/tls"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Secret serves the kubernetes.io/tls keys of one Secret and follows its
// updates. Its informer is field-selected to that one Secret: Gatehouse never
// caches the cluster's Secrets. The Secret's ca.crt (written by cert-manager
// and by the self-managed rotator) is its CA bundle.
type Secret struct {
	holder
	caHolder
	client          kubernetes.Interface
	namespace, name string
	// onEvent, when set before Start, is called after every event on the
	// Secret; the rotator uses it to act on changes without polling.
	onEvent func()
}

// NewSecret reads the Secret once and fails when it is missing or its
// certificate or key is empty or broken, naming the key.
func NewSecret(ctx context.Context, client kubernetes.Interface, namespace, name string, log logr.Logger) (*Secret, error) {
	s := &Secret{holder: holder{source: "secret", log: log}, client: client, namespace: namespace, name: name}
	secret, err := client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read certificate Secret %s/%s: %w", namespace, name, err)
	}
	pair, err := s.parse(secret)
	if err != nil {
		return nil, err
	}
	s.store(pair, nil)
	s.setCABundle(secret.Data[caCertKey], s.ref()+" key "+caCertKey, log)
	return s, nil
}

func (s *Secret) ref() string { return "Secret " + s.namespace + "/" + s.name }

func (s *Secret) parse(secret *corev1.Secret) (*tls.Certificate, error) {
	ref := s.ref()
	return ParseKeyPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey],
		ref+" key "+corev1.TLSCertKey, ref+" key "+corev1.TLSPrivateKeyKey)
}

// Start follows the Secret until ctx ends.
func (s *Secret) Start(ctx context.Context) error {
	selector := fields.OneTermEqualSelector("metadata.name", s.name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = selector
			return s.client.CoreV1().Secrets(s.namespace).List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = selector
			return s.client.CoreV1().Secrets(s.namespace).Watch(ctx, opts)
		},
	}
	// As client-go's generated informers do: a client that cannot stream
	// the initial list (the fake clientset) falls back to list and watch.
	informer := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, s.client), &corev1.Secret{}, 0, cache.Indexers{})
	onChange := func(obj any) {
		if secret, ok := obj.(*corev1.Secret); ok {
			s.store(s.parse(secret))
			s.setCABundle(secret.Data[caCertKey], s.ref()+" key "+caCertKey, s.log)
		}
		if s.onEvent != nil {
			s.onEvent()
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onChange,
		UpdateFunc: func(_, obj any) { onChange(obj) },
		DeleteFunc: func(any) {
			s.log.Info("certificate Secret deleted; keeping the certificate in memory", "secret", s.namespace+"/"+s.name)
		},
	}); err != nil {
		return err
	}
	informer.RunWithContext(ctx)
	return nil
}
