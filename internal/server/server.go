package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// Server serves webhooks over HTTPS.
type Server struct {
	opts Options
	mux  *http.ServeMux
	// inFlight and inFlightSmall hold the bytes of the request bodies
	// being read and handled (Options.MaxInFlightBytes each): ordinary
	// reviews have a budget of their own, so that they never wait for
	// room behind large ones. Each is shared by party (budget.fits).
	inFlight, inFlightSmall *budget
	// decisions holds the estimated memory of the decisions being made
	// (Options.MaxInFlightDecisionBytes): what a review costs decoded,
	// many times its body for hostile shapes.
	decisions *budget

	mu     sync.Mutex
	paths  map[string]bool
	checks map[string]func() error
	// notes are lines /readyz adds to its answer, ready or not: what the
	// replica serves without (a module that could not start).
	notes map[string]func() string
	// withdrawn are the modules that stopped deciding (Withdraw).
	withdrawn sync.Map
	// concurrency holds each module's bound on its decisions at once
	// (module.Cost.Concurrency), for the modules that declare one.
	concurrency map[string]concurrencyBound
	routes      *runtimeRoutes
	started     atomic.Bool
	// draining is set by Drain: the process is about to stop.
	draining atomic.Bool
	addr     atomic.Pointer[net.Addr]
	// listening is closed once the listener is bound.
	listening chan struct{}
}

var _ webhook.Server = (*Server)(nil)

// New returns a server; call Start to serve.
func New(opts Options) (*Server, error) {
	opts.SetDefaults()
	if opts.Certificates == nil {
		return nil, errors.New("server: a certificate source is required")
	}
	// With client certificates the budgets' reserve is the API server's
	// alone; without, nobody is verified (budget).
	verifiedOnly := opts.ClientAuth != nil
	s := &Server{
		opts:          opts,
		mux:           http.NewServeMux(),
		inFlight:      newSharedBudget(opts.MaxInFlightBytes, max(opts.MaxInFlightBytes/8, 2*firstChunk), verifiedOnly),
		inFlightSmall: newSharedBudget(opts.MaxInFlightBytes, max(opts.MaxInFlightBytes/8, 2*firstChunk), verifiedOnly),
		decisions:     newBudget(opts.MaxInFlightDecisionBytes),
		concurrency:   map[string]concurrencyBound{},
		paths:         map[string]bool{},
		checks:        map[string]func() error{},
		notes:         map[string]func() string{},
		listening:     make(chan struct{}),
	}
	if verifiedOnly {
		// A decision holds its charge only while it runs, and one review
		// may need nearly all of it: no share by address, which would
		// refuse an address's small review beside its large one. With
		// client certificates the unverified callers (the conversion
		// path's) leave the reserve to the API server's reviews.
		s.decisions = newSharedBudget(opts.MaxInFlightDecisionBytes, opts.MaxInFlightDecisionBytes, true)
	}
	s.mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	})
	s.mux.HandleFunc("/readyz", s.serveReadyz)
	s.runtime()
	s.validatePath()
	return s, nil
}

// NeedLeaderElection is false: every replica serves.
func (s *Server) NeedLeaderElection() bool { return false }

// Register serves hook at path behind the server's request guard (client
// authentication when configured, POST only, size limit, panic recovery).
// It panics on a duplicate path, as controller-runtime's server does.
func (s *Server) Register(path string, hook http.Handler) {
	s.register(path, hook, true)
}

// register serves hook at path; authenticated says whether ClientAuth
// applies (not to conversion webhooks, which the API server calls without
// credentials).
func (s *Server) register(path string, hook http.Handler, authenticated bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paths[path] {
		panic(fmt.Sprintf("server: path %q registered twice", path))
	}
	s.paths[path] = true
	s.mux.Handle(path, s.guard(path, hook, authenticated))
}

// WebhookMux returns the server's mux.
func (s *Server) WebhookMux() *http.ServeMux { return s.mux }

// StartedChecker passes once the server listens.
func (s *Server) StartedChecker() healthz.Checker {
	return func(*http.Request) error {
		if !s.started.Load() {
			return errors.New("webhook server not started")
		}
		return nil
	}
}

// AddReadyCheck adds a condition to /readyz.
func (s *Server) AddReadyCheck(name string, check func() error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks[name] = check
}

// Withdraw stops deciding for a module that failed while running: its
// webhooks, static and run-time, answer undecided (HTTP 503: the
// webhook's failure policy) until the process restarts, and its run-time
// webhooks are dropped. The host withdraws them from the configurations.
func (s *Server) Withdraw(moduleName string) {
	s.withdrawn.Store(moduleName, true)
	_ = s.SetRuntimeWebhooks(moduleName, nil, module.Enforce)
}

// Withdrawn says whether Withdraw was called for moduleName.
func (s *Server) Withdrawn(moduleName string) bool {
	_, ok := s.withdrawn.Load(moduleName)
	return ok
}

// AddReadyNote adds a line to /readyz's answer, whether the replica is
// ready or not: note returns it, "" for none. A module that could not start
// is a note, not a failed check: the replica serves its other modules
// (docs/modules.md, "A module that cannot start").
func (s *Server) AddReadyNote(name string, note func() string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notes[name] = note
}

func (s *Server) serveReadyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	// The checks run outside the lock: a slow one must not hold every
	// other probe (and AddReadyCheck) behind it.
	s.mu.Lock()
	names := make([]string, 0, len(s.checks))
	checks := make(map[string]func() error, len(s.checks))
	for name, check := range s.checks {
		names = append(names, name)
		checks[name] = check
	}
	noteNames := make([]string, 0, len(s.notes))
	notes := make(map[string]func() string, len(s.notes))
	for name, note := range s.notes {
		noteNames = append(noteNames, name)
		notes[name] = note
	}
	s.mu.Unlock()
	sort.Strings(names)
	sort.Strings(noteNames)
	var noted []string
	for _, name := range noteNames {
		if line := notes[name](); line != "" {
			noted = append(noted, name+": "+line)
		}
	}
	var failed []string
	for _, name := range names {
		if err := checks[name](); err != nil {
			failed = append(failed, name+": "+err.Error())
		}
	}
	if !s.started.Load() {
		failed = append([]string{"server: not listening"}, failed...)
	}
	if s.draining.Load() {
		failed = append([]string{"server: shutting down"}, failed...)
	}
	if len(failed) > 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(strings.Join(append(failed, noted...), "\n")))
		return
	}
	_, _ = w.Write([]byte(strings.Join(append([]string{"ok"}, noted...), "\n")))
}

// Addr returns the bound address once the server listens, nil before.
func (s *Server) Addr() net.Addr {
	if a := s.addr.Load(); a != nil {
		return *a
	}
	return nil
}

// ShutdownTimeout is how long Start waits for in-flight requests.
func (s *Server) ShutdownTimeout() time.Duration { return s.opts.ShutdownTimeout }

// ShutdownDelay is how long the process should drain (Drain) before it
// stops the server.
func (s *Server) ShutdownDelay() time.Duration { return s.opts.ShutdownDelay }

// Drain starts the hand-over to the other replicas, before the listener
// closes: /readyz fails, and every answer from now on carries
// "Connection: close", so that kube-apiserver opens its next connections
// through the Service, which no longer lists this Pod. Closing idle
// keep-alive connections ourselves would race a request being written on
// one (a POST that is not retried: a failed admission); letting each
// connection end after an answer does not.
func (s *Server) Drain() {
	if !s.draining.Swap(true) {
		s.opts.Log.Info("draining: answering with Connection: close until the server stops", "delay", s.opts.ShutdownDelay)
	}
}

// closeWhileDraining ends each connection after its answer once Drain has
// been called.
func (s *Server) closeWhileDraining(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}

// Listening is closed once the server has bound its port.
func (s *Server) Listening() <-chan struct{} { return s.listening }

// Start serves until ctx ends, then waits up to ShutdownTimeout for in-flight
// requests.
func (s *Server) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.opts.Addr)
	if err != nil {
		return fmt.Errorf("webhook server: listen on %s: %w", s.opts.Addr, err)
	}
	addr := ln.Addr()
	s.addr.Store(&addr)

	tlsConfig := &tls.Config{
		MinVersion:     s.opts.TLSMinVersion,
		CipherSuites:   TLS12CipherSuites,
		GetCertificate: s.opts.Certificates.GetCertificate,
		NextProtos:     []string{"http/1.1"},
	}
	if s.opts.ClientAuth != nil {
		// Requested, not required: kubelet probes of /healthz and /readyz
		// and the API server's conversion calls present none. The guard
		// verifies the certificate per connection against the current CAs,
		// so a reloaded bundle takes effect without a restart.
		tlsConfig.ClientAuth = tls.RequestClientCert
	}
	srv := &http.Server{
		Handler:           s.closeWhileDraining(s.mux),
		ReadTimeout:       s.opts.ReadTimeout,
		ReadHeaderTimeout: s.opts.ReadTimeout,
		WriteTimeout:      s.opts.WriteTimeout,
		IdleTimeout:       90 * time.Second,
		ErrorLog:          log.New(logWriter{s.opts.Log}, "", 0),
		ConnContext:       withConnAuth,
		// A non-nil, empty map keeps net/http from negotiating h2 on its own.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	if s.opts.EnableHTTP2 {
		tlsConfig.NextProtos = []string{"h2", "http/1.1"}
		srv.TLSNextProto = nil
		srv.Protocols = new(http.Protocols)
		srv.Protocols.SetHTTP1(true)
		srv.Protocols.SetHTTP2(true)
	}

	certsDone := make(chan error, 1)
	certCtx, stopCerts := context.WithCancel(ctx)
	defer stopCerts()
	go func() { certsDone <- s.opts.Certificates.Start(certCtx) }()
	clientCAsDone := make(chan error, 1)
	if s.opts.ClientAuth != nil {
		go func() { clientCAsDone <- s.opts.ClientAuth.CAs.Start(certCtx) }()
	} else {
		clientCAsDone <- nil
	}

	shutdownDone := make(chan error, 1)
	go func() {
		<-ctx.Done()
		s.opts.Log.Info("shutting down webhook server", "timeout", s.opts.ShutdownTimeout)
		shutdownCtx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
		defer cancel()
		shutdownDone <- srv.Shutdown(shutdownCtx)
	}()

	s.opts.Log.Info("serving webhooks", "addr", addr.String(), "http2", s.opts.EnableHTTP2)
	s.started.Store(true)
	close(s.listening)
	err = srv.Serve(tls.NewListener(ln, tlsConfig))
	if !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("webhook server: %w", err)
	}
	if err := <-shutdownDone; err != nil {
		return fmt.Errorf("webhook server: graceful shutdown: %w", err)
	}
	stopCerts()
	if err := <-certsDone; err != nil {
		return fmt.Errorf("webhook server: certificates: %w", err)
	}
	if err := <-clientCAsDone; err != nil {
		return fmt.Errorf("webhook server: client CAs: %w", err)
	}
	return nil
}

// logWriter sends net/http's own error lines (TLS handshake failures and the
// like) to the structured log.
type logWriter struct {
	log interface{ Info(string, ...any) }
}

func (w logWriter) Write(p []byte) (int, error) {
	w.log.Info(strings.TrimSpace(string(p)), "source", "net/http")
	return len(p), nil
}
