// Package server is Gatehouse's HTTPS webhook server.
//
// It owns everything a module should not have to think about: TLS with hot
// certificate reload, request limits, decoding AdmissionReviews and
// ConversionReviews, panic recovery, the enforcement mode, metrics, decision
// logs, health endpoints and graceful shutdown. It implements
// controller-runtime's webhook.Server, so the manager starts it before the
// caches: a conversion webhook must answer the manager's own initial LIST.
package server
