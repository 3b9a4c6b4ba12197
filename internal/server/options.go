package server

import (
	"crypto/tls"
	"fmt"
	"time"

	"github.com/go-logr/logr"

	"github.com/gatehouse-dev/gatehouse/internal/certs"
)

// Options configures a Server. Zero values take the defaults set in one place,
// SetDefaults.
type Options struct {
	// Addr is the listen address. Default ":9443".
	Addr string
	// EnableHTTP2 offers h2 in ALPN. Off by default: HTTP/2 Rapid Reset
	// (CVE-2023-44487) made peers disable it on webhook servers.
	EnableHTTP2 bool
	// TLSMinVersion is the lowest TLS version served: tls.VersionTLS12
	// (default) or tls.VersionTLS13. On TLS 1.2 only AEAD suites with
	// forward secrecy are offered (TLS12CipherSuites).
	TLSMinVersion uint16
	// ReadTimeout and WriteTimeout bound one request. Default 10 s each.
	ReadTimeout, WriteTimeout time.Duration
	// ShutdownTimeout is how long in-flight requests may finish after the
	// context ends. Default 30 s.
	ShutdownTimeout time.Duration
	// ShutdownDelay is how long the server keeps answering after it is
	// told to drain (Drain) before the process stops: /readyz fails and
	// every answer closes its connection, so that callers move to the other
	// replicas while this one still answers whoever has not yet seen the
	// endpoints change. Default 0 (no drain); the chart sets it
	// (docs/reliability.md, "Hand-over between replicas").
	ShutdownDelay time.Duration
	// MaxRequestBytes refuses larger bodies with 413. Default 3 MiB, the API
	// server's own request limit.
	MaxRequestBytes int64
	// MaxInFlightBytes bounds the request bodies being handled at once.
	// A module's decision can take many times its request in memory (a
	// 2.9 MB object decoded into maps took about 110 MB), so this budget,
	// not the pod's memory limit, decides how much hostile load fits. A
	// body is charged as it arrives, to its caller's share (intake.go); a
	// request beyond it waits up to InFlightWait for room, then gets 429
	// at once (the API server applies the webhook's failurePolicy).
	// Default 8 MiB: two requests of the largest size, or hundreds of
	// ordinary ones.
	MaxInFlightBytes int64
	// MaxInFlightDecisionBytes bounds the memory of the decisions being
	// made at once, as estimated from each review's JSON tokens and its
	// webhook's declared cost (module.Cost): the body budget alone let two
	// 2.9 MB reviews of small numbers take 280 MB. A decision beyond it
	// waits up to InFlightWait, then gets 429; one that alone exceeds it
	// gets 413 at once. Default 192 MiB: one review of the largest size
	// and worst shape at a time, or thousands of ordinary ones, beside
	// caches of some 100,000 objects under the chart's 512Mi.
	MaxInFlightDecisionBytes int64
	// MinBodyRate is the slowest a request body may arrive, in bytes per
	// second, after its first second: a slower one is answered 408 and
	// its connection closed, so that a caller dribbling bodies holds
	// neither budget nor connections for long. Default 64 KiB/s: the API
	// server sends a review in one write, at network speed.
	MinBodyRate int64
	// InFlightWait is how long a request waits, from its arrival, for room
	// in the budgets and its module's concurrency. Default 1 s.
	InFlightWait time.Duration
	// ClientAuth, when set, refuses webhook calls without a client
	// certificate from its CAs (401/403, before the body is read).
	ClientAuth *ClientAuthOptions
	// LogDecisions says which admission decisions are logged at info:
	// all, denied (default: every answer but an allow; allows at V(1)) or
	// none.
	LogDecisions LogDecisions
	// Certificates provides the serving certificate. Required.
	Certificates certs.Source
	Log          logr.Logger
}

const (
	defaultAddr             = ":9443"
	defaultTimeout          = 10 * time.Second
	defaultShutdownTimeout  = 30 * time.Second
	defaultMaxRequestBytes  = 3 << 20
	defaultMaxInFlightBytes = 8 << 20
	defaultMinBodyRate      = 64 << 10
	// defaultMaxInFlightDecisionBytes: see MaxInFlightDecisionBytes.
	defaultMaxInFlightDecisionBytes = 192 << 20
)

// SetDefaults gives every zero field its default. New calls it; a command
// line calls it first to show the defaults as its flags' (cmd/gatehouse).
func (o *Options) SetDefaults() {
	if o.Addr == "" {
		o.Addr = defaultAddr
	}
	if o.TLSMinVersion == 0 {
		o.TLSMinVersion = tls.VersionTLS12
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = defaultTimeout
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = defaultTimeout
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = defaultShutdownTimeout
	}
	if o.MaxRequestBytes == 0 {
		o.MaxRequestBytes = defaultMaxRequestBytes
	}
	if o.MaxInFlightBytes == 0 {
		o.MaxInFlightBytes = defaultMaxInFlightBytes
	}
	// A budget smaller than one request would refuse the largest forever.
	o.MaxInFlightBytes = max(o.MaxInFlightBytes, o.MaxRequestBytes)
	if o.MaxInFlightDecisionBytes == 0 {
		o.MaxInFlightDecisionBytes = defaultMaxInFlightDecisionBytes
	}
	if o.MinBodyRate <= 0 {
		o.MinBodyRate = defaultMinBodyRate
	}
	if o.InFlightWait == 0 {
		o.InFlightWait = time.Second
	}
	if o.LogDecisions == "" {
		o.LogDecisions = LogDeniedDecisions
	}
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
}

// TLS12CipherSuites are the suites offered on TLS 1.2: ECDHE key exchange
// (forward secrecy) with AEAD ciphers only. Go's defaults also offer
// CBC-SHA1 suites (Lucky13-style padding oracles) and RSA key exchange;
// kube-apiserver's client speaks TLS 1.3 or these. TLS 1.3's suites are
// not configurable and are all AEAD.
var TLS12CipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// TLSVersionName spells a version as ParseTLSVersion reads it.
func TLSVersionName(v uint16) string {
	switch v {
	case tls.VersionTLS12:
		return "1.2"
	case tls.VersionTLS13:
		return "1.3"
	}
	return fmt.Sprintf("0x%04x", v)
}

// ParseTLSVersion reads --tls-min-version: "1.2" or "1.3".
func ParseTLSVersion(s string) (uint16, error) {
	switch s {
	case "1.2", "VersionTLS12":
		return tls.VersionTLS12, nil
	case "1.3", "VersionTLS13":
		return tls.VersionTLS13, nil
	}
	return 0, fmt.Errorf("TLS version %q: want 1.2 or 1.3 (older versions are never served)", s)
}

// LogDecisions is which admission decisions are logged at info.
type LogDecisions string

const (
	// LogAllDecisions logs every decision at info.
	LogAllDecisions LogDecisions = "all"
	// LogDeniedDecisions logs denials, warnings, errors and undecided
	// answers at info, and allows at V(1): allows are most decisions, and
	// say least.
	LogDeniedDecisions LogDecisions = "denied"
	// LogNoDecisions logs none (panics are logged still).
	LogNoDecisions LogDecisions = "none"
)

// ParseLogDecisions reads --log-decisions.
func ParseLogDecisions(s string) (LogDecisions, error) {
	switch l := LogDecisions(s); l {
	case LogAllDecisions, LogDeniedDecisions, LogNoDecisions:
		return l, nil
	}
	return "", fmt.Errorf("--log-decisions %q: want all, denied or none", s)
}
