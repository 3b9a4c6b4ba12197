package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/certs"
	"github.com/gatehouse-dev/gatehouse/internal/server"
	"github.com/gatehouse-dev/gatehouse/internal/webhookconfig"
)

// Gatehouse is an in-process Gatehouse serving a control plane.
type Gatehouse struct {
	*app.Gatehouse
	// URL is the server's base URL, for example https://127.0.0.1:41234.
	URL string
	// HTTPClient trusts the server's CA and presents the control plane's
	// webhook client certificate, as kube-apiserver does.
	HTTPClient *http.Client
	// TLSConfig trusts the server's CA and presents no certificate: a
	// caller without an identity.
	TLSConfig *tls.Config
	CertDir   string

	cancel   context.CancelFunc
	done     chan error
	stopOnce sync.Once
	stopErr  error
}

// NoClientAuth, as opts.Server.ClientAuth, starts Gatehouse without
// --client-ca-file, as the chart does by default: it serves any caller,
// and cannot tell the API server from anyone else reaching its port.
var NoClientAuth = &server.ClientAuthOptions{}

// StartGatehouse generates certificates in dir, starts Gatehouse with opts on a
// free loopback port (unless opts.Server.Addr is set), lets it manage its
// webhook configurations in cp and waits until /readyz passes. Without
// opts.ManageWebhooks the configurations point at the bound port and trust
// the generated CA; a caller that sets it (a URL by name, a Secret's CA)
// chooses both. A self-managed certificate source is trusted through its own
// CA bundle. Unless opts.Server.ClientAuth is set, Gatehouse serves only
// callers with the control plane's webhook client certificate
// (--client-ca-file), as a cluster that authenticates its API server does;
// HTTPClient presents that certificate too.
func StartGatehouse(ctx context.Context, cp *ControlPlane, dir string, opts app.Options) (*Gatehouse, error) {
	// The binary that serves confined entries (render workers) is linked
	// now, beside the start, so that no admission waits for the link
	// (seconds; longer on a loaded machine) inside its webhook timeout.
	go func() { _, _ = GatehouseForEntries() }()
	bundle, err := certs.SelfSigned([]string{"127.0.0.1", "localhost"}, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	certDir := filepath.Join(dir, "certs")
	if err := bundle.WriteDir(certDir); err != nil {
		return nil, err
	}
	if opts.RestConfig == nil {
		opts.RestConfig = cp.Config
	}
	// Gatehouse's namespace exists in a cluster before Gatehouse does:
	// what it keeps there (its records key Secret, the protected bypass
	// record) is written at its start.
	if opts.Namespace != "" {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: opts.Namespace}}
		if err := cp.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create Gatehouse's namespace %s: %w", opts.Namespace, err)
		}
	}
	opts.CertDir = certDir
	if opts.RecordsKeyDir == "" && opts.RecordsKeySecret == "" && opts.CertSecret == "" {
		// Every Gatehouse on one control plane is a replica of one
		// install: they sign and verify records with the same keys, as
		// replicas sharing the keys' Secret do (a replica started later
		// must honour what an earlier one signed).
		opts.RecordsKeyDir = filepath.Join(cp.Dir, "records-key")
	}
	if opts.Server.Addr == "" {
		opts.Server.Addr = "127.0.0.1:0"
	}
	if opts.MetricsAddr == "" {
		opts.MetricsAddr = "0"
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	switch {
	case opts.Server.ClientAuth == NoClientAuth:
		opts.Server.ClientAuth = nil
	case opts.Server.ClientAuth == nil && cp.WebhookClientCAFile != "":
		cas, err := certs.NewClientCA(cp.WebhookClientCAFile, opts.Log.WithName("certs"))
		if err != nil {
			return nil, err
		}
		opts.Server.ClientAuth = &server.ClientAuthOptions{CAs: cas}
	}
	if opts.ManageWebhooks == nil {
		// No URL: Gatehouse points the configurations at the port it bound.
		opts.ManageWebhooks = &webhookconfig.Target{CABundle: bundle.CACert}
	} else if t := opts.ManageWebhooks; t.URL == "" && t.Service == nil && len(t.CABundle) == 0 {
		// A Target that only adds labels or annotations: the bound port
		// and the generated CA, as without one.
		copied := *t
		copied.CABundle = bundle.CACert
		opts.ManageWebhooks = &copied
	}

	runCtx, cancel := context.WithCancel(ctx)
	g, err := app.New(runCtx, opts)
	if err != nil {
		cancel()
		return nil, err
	}
	gh := &Gatehouse{Gatehouse: g, CertDir: certDir, cancel: cancel, done: make(chan error, 1)}
	go func() { gh.done <- g.Start(runCtx) }()

	select {
	case <-g.Server.Listening():
	case err := <-gh.done:
		cancel()
		return nil, fmt.Errorf("gatehouse stopped before listening: %v", err)
	case <-time.After(time.Minute):
		cancel()
		return nil, fmt.Errorf("gatehouse did not listen within a minute")
	}
	gh.URL = "https://" + g.Server.Addr().String()
	if opts.ManageWebhooks.URL != "" {
		gh.URL = opts.ManageWebhooks.URL
	}

	ca := opts.ManageWebhooks.CABundle
	if bundler, ok := g.Certificates().(certs.CABundler); ok && len(ca) == 0 {
		ca = bundler.CABundle()
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	gh.TLSConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	clientConfig := gh.TLSConfig.Clone()
	if b := cp.WebhookClient; b != nil {
		pair, err := tls.X509KeyPair(b.ClientCert, b.ClientKey)
		if err != nil {
			cancel()
			return nil, err
		}
		clientConfig.Certificates = []tls.Certificate{pair}
	}
	gh.HTTPClient = &http.Client{
		Timeout:   15 * time.Second,
		Transport: &http.Transport{TLSClientConfig: clientConfig},
	}
	if err := gh.waitReady(ctx, 2*time.Minute); err != nil {
		_ = gh.Stop() // err is the cause
		return nil, err
	}
	return gh, nil
}

func (g *Gatehouse) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		resp, err := g.HTTPClient.Get(g.URL + "/readyz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = string(body)
		} else {
			last = err.Error()
		}
		select {
		case err := <-g.done:
			return fmt.Errorf("gatehouse stopped: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("gatehouse not ready after %s: %s", timeout, last)
}

// Stop shuts Gatehouse down and waits for it; later calls return the first
// one's result.
func (g *Gatehouse) Stop() error {
	g.stopOnce.Do(func() {
		g.cancel()
		select {
		case g.stopErr = <-g.done:
		case <-time.After(time.Minute):
			g.stopErr = fmt.Errorf("gatehouse did not stop within a minute")
		}
	})
	return g.stopErr
}
