package server

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// runtimeRoutes serves the webhooks modules register while running, under
// /validate/<module>/. A path nobody serves (a webhook removed while the API
// server still calls it) is answered "allowed": the webhook is gone, and what
// it judged is no longer Gatehouse's to judge.
type runtimeRoutes struct {
	server *Server
	mu     sync.RWMutex
	byPath map[string]*admissionHandler
	gone   *admissionHandler
}

const runtimePrefix = "/validate/"

// ValidatePath is the seed's validation endpoint (the dry-run spec's
// server contract). Gatehouse serves each validator at a path of its own,
// so no kind has a validator here: every review is allowed, as the spec
// allows a kind without a validator, behind the same guard (405, 400,
// 413, client authentication) as every webhook. Without it the mux's
// subtree pattern /validate/ answered 307 to every method and body.
const ValidatePath = "/validate"

func (s *Server) validatePath() {
	s.Admission("gatehouse", module.Webhook{
		Name: "validate.gatehouse.dev", Path: ValidatePath, Type: module.Validating,
		Admit: func(_ context.Context, req admission.Request) admission.Response {
			return admission.Allowed("no validator is registered for " + module.GVKString(schema.GroupVersionKind(req.Kind)) + " at " + ValidatePath)
		},
	}, module.Enforce)
}

func (s *Server) runtime() *runtimeRoutes {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.routes == nil {
		s.routes = &runtimeRoutes{server: s, byPath: map[string]*admissionHandler{}}
		s.routes.gone = &admissionHandler{server: s, module: "gatehouse", hook: module.Webhook{
			Name: "removed.gatehouse.dev", Type: module.Validating,
			Admit: func(_ context.Context, req admission.Request) admission.Response {
				return admission.Allowed("no webhook is served at this path any more")
			},
		}}
		s.paths[runtimePrefix] = true
		s.mux.Handle(runtimePrefix, s.guard(runtimePrefix, s.routes, true))
	}
	return s.routes
}

func (rt *runtimeRoutes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt.mu.RLock()
	h, ok := rt.byPath[r.URL.Path]
	rt.mu.RUnlock()
	if !ok {
		h = rt.gone
	}
	h.ServeHTTP(w, r)
}

// SetRuntimeWebhooks replaces the run-time admission webhooks of moduleName.
// Every path must lie under module.RuntimePath(moduleName).
func (s *Server) SetRuntimeWebhooks(moduleName string, hooks []module.Webhook, mode module.Enforcement) error {
	prefix := module.RuntimePath(moduleName)
	next := map[string]*admissionHandler{}
	for _, h := range hooks {
		if err := h.Validate(); err != nil {
			return err
		}
		if h.Type == module.Conversion {
			return fmt.Errorf("webhook %s: conversion webhooks cannot be added at run time", h.Name)
		}
		if !strings.HasPrefix(h.Path, prefix) || len(h.Path) == len(prefix) {
			return fmt.Errorf("webhook %s: run-time path %q must lie under %s", h.Name, h.Path, prefix)
		}
		if _, dup := next[h.Path]; dup {
			return fmt.Errorf("webhook %s: path %s used twice", h.Name, h.Path)
		}
		handler, err := s.admissionHandler(moduleName, h, mode)
		if err != nil {
			return err
		}
		next[h.Path] = handler
	}
	rt := s.runtime()
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for path := range rt.byPath {
		if strings.HasPrefix(path, prefix) {
			delete(rt.byPath, path)
		}
	}
	for path, h := range next {
		rt.byPath[path] = h
	}
	return nil
}

// RuntimeWebhookPaths are the paths of moduleName's run-time webhooks
// being served, sorted.
func (s *Server) RuntimeWebhookPaths(moduleName string) []string {
	prefix := module.RuntimePath(moduleName)
	rt := s.runtime()
	rt.mu.RLock()
	defer rt.mu.RUnlock()
	var paths []string
	for path := range rt.byPath {
		if strings.HasPrefix(path, prefix) {
			paths = append(paths, path)
		}
	}
	sort.Strings(paths)
	return paths
}
