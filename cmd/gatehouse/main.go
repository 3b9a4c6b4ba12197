// Command gatehouse serves a Kubernetes platform's admission control:
// validating, mutating and CRD-conversion webhooks, decided from informer caches.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"go.uber.org/zap/zapcore"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/certs"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/reports"
	"github.com/gatehouse-dev/gatehouse/internal/server"
	"github.com/gatehouse-dev/gatehouse/internal/webhookconfig"
)

func main() {
	os.Exit(execute(os.Args[1:], os.Stdout, os.Stderr))
}

// serveFlags registers the server's flags on fs (the process's flag set,
// beside controller-runtime's --kubeconfig) and returns the server's main,
// to run once they are parsed, and the flags to keep out of --help. The
// flags' defaults are app.Options' own (SetDefaults), never written here a
// second time. The modules (the catalogue's) declare their own flags
// (app.AddModuleFlags): this file names no module.
func serveFlags(fs *flag.FlagSet, modules []module.Module) (func() error, []string) {
	var opts app.Options
	opts.SetDefaults()
	moduleFlags, hidden := app.AddModuleFlags(fs, modules)
	var (
		configFile    string
		moduleList    string
		enforcement   string
		webhookURL    string
		webhookCA     string
		serviceName   string
		servicePort   int
		selfManaged   bool
		rotationGrace time.Duration
		tlsMinVersion string
		clientCAFile  string
		clientNames   string
		// webhookLabels and webhookAnnotations go onto the managed
		// configurations.
		webhookLabels, webhookAnnotations map[string]string
	)
	fs.StringVar(&opts.Server.Addr, "webhook-bind-address", opts.Server.Addr, "Address the HTTPS webhook server listens on.")
	fs.StringVar(&tlsMinVersion, "tls-min-version", server.TLSVersionName(opts.Server.TLSMinVersion), "Lowest TLS version the webhook server accepts: 1.2 (AEAD suites with ECDHE only) or 1.3.")
	fs.BoolVar(&opts.Server.EnableHTTP2, "enable-http2", opts.Server.EnableHTTP2, "Offer HTTP/2 on the webhook server (off by default, see CVE-2023-44487).")
	fs.StringVar(&opts.CertDir, "cert-dir", opts.CertDir, "Directory holding tls.crt and tls.key; reloaded when they change.")
	fs.StringVar(&opts.CertSecret, "cert-secret", "", "namespace/name of a kubernetes.io/tls Secret to serve instead of --cert-dir; followed for rotation.")
	fs.StringVar(&opts.RecordsKeySecret, "records-key-secret", "", "namespace/name of the Secret holding the keys that sign Gatehouse's records on objects (a config's author); Gatehouse creates it and its leader rotates the keys. Default with --cert-secret: <namespace>/<instance>-records-key.")
	fs.StringVar(&opts.RecordsKeyDir, "records-key-dir", "", "Directory holding the keys that sign Gatehouse's records instead of a Secret (one process; created when missing). Default without --cert-secret: records-key beside --cert-dir.")
	fs.StringVar(&clientCAFile, "client-ca-file", "", "PEM CA bundle that webhook callers' client certificates must chain to (kube-apiserver presents one through its AdmissionConfiguration kubeConfigFile); re-read when it changes. Without a certificate, webhook calls get 401; /healthz, /readyz and CRD conversion stay open (docs/security.md).")
	fs.StringVar(&clientNames, "client-names", "", "With --client-ca-file: comma-separated client certificate names (common name or DNS name) served; empty serves any certificate the CA signed.")
	fs.StringVar(&opts.MetricsAddr, "metrics-bind-address", opts.MetricsAddr, "Address for Prometheus metrics (loopback unless told otherwise); \"0\" disables them.")
	fs.BoolVar(&opts.MetricsSecure, "metrics-secure", opts.MetricsSecure, "Serve metrics over HTTPS to callers the API server authenticates (TokenReview) and authorizes for get on /metrics (SubjectAccessReview).")
	fs.StringVar(&opts.Namespace, "namespace", envOr("POD_NAMESPACE", opts.Namespace), "Namespace Gatehouse runs in; its webhooks never intercept it.")
	fs.StringVar(&opts.PprofAddr, "pprof-bind-address", opts.PprofAddr, "Address for net/http/pprof profiles; \"0\" disables them.")
	fs.StringVar(&configFile, "config", "", "Optional YAML file with a modules section; flags override it.")
	fs.StringVar(&moduleList, "modules", "", "Comma-separated modules to enable, e.g. pvsafe,nodegroup.")
	fs.StringVar(&enforcement, "enforcement", "", "Per-module enforcement, e.g. pvsafe=warn. Modes: enforce (default), warn.")
	fs.StringVar(&webhookURL, "manage-webhooks-url", "", "When set (e.g. https://127.0.0.1:9443), Gatehouse writes its own webhook configurations pointing at this base URL.")
	fs.StringVar(&webhookCA, "manage-webhooks-ca-file", "", "PEM CA bundle written into managed webhook configurations (default: the certificate source's CA); followed, so that a CA rotated in the file reaches them without a restart.")
	fs.StringVar(&serviceName, "webhook-service", "", "In-cluster managed mode: Gatehouse keeps its webhook configurations pointing at this Service in --namespace.")
	fs.IntVar(&servicePort, "webhook-service-port", 443, "Port of --webhook-service.")
	fs.Func("webhook-configuration-labels", "Managed mode: labels added to the webhook configurations (key=value,...; repeatable), kept by the drift repair; Gatehouse's own labels win over a namesake.", keyValues(&webhookLabels))
	fs.Func("webhook-configuration-annotations", "Managed mode: annotations added to the webhook configurations (key=value,...; repeatable), kept by the drift repair.", keyValues(&webhookAnnotations))
	fs.DurationVar(&rotationGrace, "self-managed-certs-rotation-grace", certs.DefaultRotationGrace, "With --self-managed-certs: how long each phase of a CA rotation waits for every replica and kube-apiserver to see the previous one (new CA trusted, then served, then the old CA dropped). Shorter only for tests.")
	fs.BoolVar(&selfManaged, "self-managed-certs", false, "Create and rotate the --cert-secret Secret (CA and serving certificate) in process; the webhook configurations' CA bundle follows it.")
	fs.Func("max-in-flight-bytes", "Request bodies the webhook server holds at once (a quantity, e.g. 8Mi; reviews up to 256Ki have as much again of their own); beyond it a request waits --in-flight-wait, then gets 429. Default "+quantity(opts.Server.MaxInFlightBytes)+".", quantityFlag(&opts.Server.MaxInFlightBytes))
	fs.Func("max-in-flight-decision-bytes", "Estimated memory of the decisions made at once (a quantity, e.g. 192Mi): a review costs its JSON tokens times what its module measured per token; beyond it 429, a review costing more alone 413. Default "+quantity(opts.Server.MaxInFlightDecisionBytes)+"; raise it with the memory limit.", quantityFlag(&opts.Server.MaxInFlightDecisionBytes))
	fs.DurationVar(&opts.Server.ShutdownDelay, "shutdown-delay", opts.Server.ShutdownDelay, "On SIGTERM, keep answering this long with /readyz failing and every connection closed after its answer, before the server stops (up to 30 s more for requests in flight): kube-apiserver moves to the other replicas without a failed call. The chart sets 10s; the Pod's terminationGracePeriodSeconds must exceed it by 35s.")
	fs.Func("log-decisions", "Which admission decisions are logged at info: all, denied (default: every answer but an allow; allows at V(1), --zap-log-level=debug) or none.", func(s string) (err error) {
		opts.Server.LogDecisions, err = server.ParseLogDecisions(s)
		return err
	})
	fs.DurationVar(&opts.Server.InFlightWait, "in-flight-wait", opts.Server.InFlightWait, "How long a request waits for room in the in-flight budgets and its module's concurrency before 429 or 503.")
	fs.DurationVar(&opts.Reports.Interval, "report-interval", 0, "How often the leader runs every module's periodic check and writes its wgpolicyk8s.io PolicyReports (when that API is served); 0 keeps each module's own period (docs/policy-reports.md).")
	fs.Func("policy-reports-api", "Report API of the periodic checks: auto (openreports.io/v1alpha1 Reports where served, else wgpolicyk8s.io/v1alpha2 PolicyReports), openreports or wgpolicyk8s. This install's reports in the other API are deleted (docs/policy-reports.md).", func(s string) error {
		api, err := reports.ParseAPI(s)
		opts.Reports.API = api
		return err
	})
	fs.IntVar(&opts.Reports.MaxResults, "report-max-results", reports.DefaultMaxResults, "Most results in one PolicyReport; the summary counts every finding and a skip result says how many were left out.")
	fs.BoolVar(&opts.LeaderElection, "leader-elect", opts.LeaderElection, "Elect one replica to write the webhook configurations (every replica serves).")
	fs.DurationVar(&opts.LeaseDuration, "leader-elect-lease-duration", opts.LeaseDuration, "How long a leader's lease lasts without renewal; another replica takes over at most this long after the leader dies.")
	fs.DurationVar(&opts.RenewDeadline, "leader-elect-renew-deadline", opts.RenewDeadline, "How long the leader retries renewing its lease before it gives up leading (less than --leader-elect-lease-duration).")
	fs.DurationVar(&opts.RetryPeriod, "leader-elect-retry-period", opts.RetryPeriod, "How often replicas try to acquire or renew the lease.")
	fs.StringVar(&opts.Instance, "instance-name", opts.Instance, "Name of this install: its webhook configurations are <name>-validating and <name>-mutating, its lease <name>-leader, and what it writes is labelled gatehouse.dev/instance=<name>, so that installs in one cluster never touch each other's objects (the chart passes its fullname).")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	return func() error {
		// Decision logs are written on the admission hot path: buffer them and
		// flush every second (and at exit) instead of one write(2) per line.
		logSink := &zapcore.BufferedWriteSyncer{WS: zapcore.AddSync(os.Stderr), Size: 256 << 10, FlushInterval: time.Second}
		defer func() { _ = logSink.Stop() }() // a failed last write to stderr has nowhere to go
		zapOpts.DestWriter = logSink
		log := zap.New(zap.UseFlagOptions(&zapOpts))
		ctrl.SetLogger(log)
		opts.Log = log

		tlsMin, err := server.ParseTLSVersion(tlsMinVersion)
		if err != nil {
			return err
		}
		opts.Server.TLSMinVersion = tlsMin
		if clientCAFile != "" {
			cas, err := certs.NewClientCA(clientCAFile, log.WithName("certs"))
			if err != nil {
				return fmt.Errorf("--client-ca-file: %w", err)
			}
			opts.Server.ClientAuth = &server.ClientAuthOptions{CAs: cas, AllowedNames: module.SplitList(clientNames)}
		} else if clientNames != "" {
			return errors.New("--client-names needs --client-ca-file")
		}
		opts.Modules = map[string]app.ModuleConfig{}
		if configFile != "" {
			cfg, err := app.LoadFile(configFile)
			if err != nil {
				return err
			}
			for name, c := range cfg.Modules {
				opts.Modules[name] = c
			}
		}
		for _, name := range app.ParseModuleList(moduleList) {
			c := opts.Modules[name]
			c.Enabled = true
			opts.Modules[name] = c
		}
		modes, err := app.ParseEnforcementList(enforcement)
		if err != nil {
			return err
		}
		for name, mode := range modes {
			c, ok := opts.Modules[name]
			if !ok {
				return fmt.Errorf("--enforcement names module %s, which is not enabled", name)
			}
			c.Enforcement = mode
			opts.Modules[name] = c
		}
		opts.Catalogue, opts.ModuleFlags = modules, moduleFlags
		target, err := webhookTarget(webhookURL, serviceName, int32(servicePort), opts.Namespace, webhookCA)
		if err != nil {
			return err
		}
		if target != nil {
			target.Labels, target.Annotations = webhookLabels, webhookAnnotations
		}
		opts.ManageWebhooks = target
		opts.ManageWebhooksCAFile = webhookCA
		if selfManaged {
			if opts.CertSecret == "" {
				return errors.New("--self-managed-certs needs --cert-secret namespace/name")
			}
			opts.SelfManagedCerts = &certs.SelfManagedOptions{Grace: rotationGrace}
		}

		cfg, err := ctrl.GetConfig()
		if err != nil {
			return fmt.Errorf("kubernetes client configuration: %w", err)
		}
		opts.RestConfig = cfg

		ctx := ctrl.SetupSignalHandler()
		g, err := app.New(ctx, opts)
		if err != nil {
			return err
		}
		if err := g.Start(ctx); err != nil && !errors.Is(err, ctx.Err()) {
			return err
		}
		return nil
	}, hidden
}

// webhookTarget is nil (static mode) unless a URL or a Service is given.
func webhookTarget(url, service string, port int32, namespace, caFile string) (*webhookconfig.Target, error) {
	if url != "" && service != "" {
		return nil, errors.New("--manage-webhooks-url and --webhook-service exclude each other")
	}
	if url == "" && service == "" {
		if caFile != "" {
			return nil, errors.New("--manage-webhooks-ca-file needs --manage-webhooks-url or --webhook-service")
		}
		return nil, nil
	}
	// The CA file is read and followed by Gatehouse (app.Options.ManageWebhooksCAFile).
	t := &webhookconfig.Target{Namespace: namespace}
	if url != "" {
		t.URL = strings.TrimSuffix(url, "/")
		return t, nil
	}
	t.Service = &admissionregistrationv1.ServiceReference{Namespace: namespace, Name: service, Port: &port}
	return t, nil
}

// keyValues reads key=value pairs, comma-separated, into *m; a repeated
// flag adds to what the earlier ones set.
func keyValues(m *map[string]string) func(string) error {
	return func(s string) error {
		if *m == nil {
			*m = map[string]string{}
		}
		for _, pair := range module.SplitList(s) {
			k, v, ok := strings.Cut(pair, "=")
			if !ok || k == "" {
				return fmt.Errorf("%q: want key=value", pair)
			}
			(*m)[k] = v
		}
		return nil
	}
}

func envOr(key, fallback string) string {
	if v := strings.TrimSpace(os.Getenv(key)); v != "" {
		return v
	}
	return fallback
}

// quantity spells bytes as a flag's usage shows it: 8Mi.
func quantity(bytes int64) string {
	return resource.NewQuantity(bytes, resource.BinarySI).String()
}

// quantityFlag parses a Kubernetes quantity (8Mi, 200M, 1048576) into a
// positive number of bytes.
func quantityFlag(into *int64) func(string) error {
	return func(s string) error {
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return err
		}
		if q.Sign() <= 0 {
			return fmt.Errorf("%s: must be positive", s)
		}
		*into = q.Value()
		return nil
	}
}
