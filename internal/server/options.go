package server

import (
	"time"

	"github.com/go-logr/logr"

	"github.com/gatehouse-dev/gatehouse/internal/certs"
)

// Options configures a Server. Zero values take the defaults set in one place,
// setDefaults.
type Options struct {
	// Addr is the listen address. Default ":9443".
	Addr string
	// EnableHTTP2 offers h2 in ALPN. Off by default: HTTP/2 Rapid Reset
	// (CVE-2023-44487) made peers disable it on webhook servers.
	EnableHTTP2 bool
	// ReadTimeout and WriteTimeout bound one request. Default 10 s each.
	ReadTimeout, WriteTimeout time.Duration
	// ShutdownTimeout is how long in-flight requests may finish after the
	// context ends. Default 30 s.
	ShutdownTimeout time.Duration
	// MaxRequestBytes refuses larger bodies with 413. Default 3 MiB, the API
	// server's own request limit.
	MaxRequestBytes int64
	// Certificates provides the serving certificate. Required.
	Certificates certs.Source
	Log          logr.Logger
}

const (
	defaultAddr            = ":9443"
	defaultTimeout         = 10 * time.Second
	defaultShutdownTimeout = 30 * time.Second
	defaultMaxRequestBytes = 3 << 20
)

func (o *Options) setDefaults() {
	if o.Addr == "" {
		o.Addr = defaultAddr
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
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
}
