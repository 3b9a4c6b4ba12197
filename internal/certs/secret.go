package certs

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// apiConn is an uncached controller-runtime client and what an informer
// for the same API server shares with it. The certificate source is built
// before the manager (the manager serves with it), so it has its own.
type apiConn struct {
	cfg        *rest.Config
	httpClient *http.Client
	mapper     meta.RESTMapper
	client     client.Client
}

func newAPIConn(cfg *rest.Config) (*apiConn, error) {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{HTTPClient: httpClient, Mapper: mapper})
	if err != nil {
		return nil, err
	}
	return &apiConn{cfg: cfg, httpClient: httpClient, mapper: mapper, client: c}, nil
}

// Secret serves the kubernetes.io/tls keys of one Secret and follows its
// updates. Its informer is field-selected to that one Secret: Gatehouse never
// caches the cluster's Secrets, and RBAC's resourceNames authorize a list or
// watch only when it selects the name. The Secret's ca.crt (written by
// cert-manager and by the self-managed rotator) is its CA bundle.
type Secret struct {
	holder
	caHolder
	conn            *apiConn
	namespace, name string
	// onEvent, when set before Start, is called after every event on the
	// Secret; the rotator uses it to act on changes without polling.
	onEvent func()
}

// NewSecret reads the Secret once and fails when it is missing or its
// certificate or key is empty or broken, naming the key.
func NewSecret(ctx context.Context, cfg *rest.Config, namespace, name string, log logr.Logger) (*Secret, error) {
	conn, err := newAPIConn(cfg)
	if err != nil {
		return nil, err
	}
	return newSecret(ctx, conn, namespace, name, log)
}

func newSecret(ctx context.Context, conn *apiConn, namespace, name string, log logr.Logger) (*Secret, error) {
	s := &Secret{holder: holder{source: "secret", log: log}, conn: conn, namespace: namespace, name: name}
	secret := &corev1.Secret{}
	if err := conn.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, secret); err != nil {
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
	informers, err := cache.New(s.conn.cfg, cache.Options{
		HTTPClient:        s.conn.httpClient,
		Mapper:            s.conn.mapper,
		DefaultNamespaces: map[string]cache.Config{s.namespace: {}},
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Field: fields.OneTermEqualSelector("metadata.name", s.name)},
		},
		DefaultTransform: cache.TransformStripManagedFields(),
	})
	if err != nil {
		return err
	}
	// Before the cache starts this only registers the informer.
	informer, err := informers.GetInformer(ctx, &corev1.Secret{})
	if err != nil {
		return err
	}
	onChange := func(obj any) {
		if secret, ok := obj.(*corev1.Secret); ok {
			s.store(s.parse(secret))
			s.setCABundle(secret.Data[caCertKey], s.ref()+" key "+caCertKey, s.log)
		}
		if s.onEvent != nil {
			s.onEvent()
		}
	}
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    onChange,
		UpdateFunc: func(_, obj any) { onChange(obj) },
		DeleteFunc: func(any) {
			s.log.Info("certificate Secret deleted; keeping the certificate in memory", "secret", s.namespace+"/"+s.name)
		},
	}); err != nil {
		return err
	}
	return informers.Start(ctx)
}
