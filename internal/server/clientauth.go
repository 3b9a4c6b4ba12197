package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
)

// ClientCAs is the CA bundle client certificates are verified against,
// reloaded while the server runs (certs.ClientCA).
type ClientCAs interface {
	// Pool returns the current CAs; a new pool after each reload.
	Pool() *x509.CertPool
	// Start follows the source until ctx ends.
	Start(ctx context.Context) error
}

// ClientAuthOptions makes the webhook paths serve only callers that present
// a client certificate signed by one of CAs: kube-apiserver presents one
// through its AdmissionConfiguration's kubeConfigFile. /healthz and /readyz
// stay open to kubelet probes, and so do the CRD conversion paths, because
// kube-apiserver calls conversion webhooks without any client credentials
// (k8s.io/apiextensions-apiserver pkg/apiserver/conversion
// webhook_converter.go resolves them from an empty kubeconfig) and a
// conversion answer carries only the objects its request carried.
type ClientAuthOptions struct {
	CAs ClientCAs
	// AllowedNames, when not empty, are the certificate names served: the
	// subject's common name or one of its DNS names must be among them.
	AllowedNames []string
}

// connAuthKey holds a connection's *connAuth in its requests' contexts.
type connAuthKey struct{}

// connAuth caches the verification of a connection's client certificate:
// the API server sends many reviews over one kept-alive connection, and a
// chain verification costs more than a decision. It is redone when the CA
// pool was reloaded since.
type connAuth struct {
	mu   sync.Mutex
	pool *x509.CertPool
	code int
	msg  string
}

func withConnAuth(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, connAuthKey{}, &connAuth{})
}

// authenticate returns 0 when the request's connection presented an
// accepted client certificate, else 401 (none presented) or 403 (not
// trusted or not allowed) with the reason.
func (s *Server) authenticate(r *http.Request) (int, string) {
	auth := s.opts.ClientAuth
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return http.StatusUnauthorized, "a client certificate is required: Gatehouse's webhooks serve only the Kubernetes API server"
	}
	pool := auth.CAs.Pool()
	cached, _ := r.Context().Value(connAuthKey{}).(*connAuth)
	if cached == nil {
		return s.verifyClient(r.TLS, pool)
	}
	cached.mu.Lock()
	defer cached.mu.Unlock()
	if cached.pool != pool {
		cached.code, cached.msg = s.verifyClient(r.TLS, pool)
		cached.pool = pool
	}
	return cached.code, cached.msg
}

func (s *Server) verifyClient(state *tls.ConnectionState, pool *x509.CertPool) (int, string) {
	leaf := state.PeerCertificates[0]
	intermediates := x509.NewCertPool()
	for _, c := range state.PeerCertificates[1:] {
		intermediates.AddCert(c)
	}
	_, err := leaf.Verify(x509.VerifyOptions{
		Roots:         pool,
		Intermediates: intermediates,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return http.StatusForbidden, fmt.Sprintf("client certificate %q is not trusted: %v", leaf.Subject.CommonName, err)
	}
	if names := s.opts.ClientAuth.AllowedNames; len(names) > 0 &&
		!slices.Contains(names, leaf.Subject.CommonName) &&
		!slices.ContainsFunc(leaf.DNSNames, func(n string) bool { return slices.Contains(names, n) }) {
		return http.StatusForbidden, fmt.Sprintf("client certificate %q is not among the allowed client names", leaf.Subject.CommonName)
	}
	return 0, ""
}
