package main

import (
	"context"
	"fmt"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/selftest"
	"github.com/gatehouse-dev/gatehouse/internal/webhookconfig"
)

// newSelftestCommand is `gatehouse selftest`: the chart's `helm test`,
// from the API server's side.
func newSelftestCommand() *cobra.Command {
	var (
		opts       selftest.Options
		instance   string
		kubeconfig string
	)
	cmd := &cobra.Command{
		Use:   "selftest",
		Short: "Check an install from the API server's side (the chart's helm test)",
		Long: `Check an installed Gatehouse as the API server sees it:

 1. every replica of --deployment is Ready;
 2. the install's ValidatingWebhookConfiguration (<--instance-name>-validating)
    exists and holds webhooks;
 3. with --volume (pvsafe enabled): a PersistentVolume of that name, which
    can hold no data, is created and a server-side dry-run deletion of it
    is refused by pvsafe (or answered with its warning in warn mode), then
    it is removed.

The chart runs it as its helm test, with a ServiceAccount allowed exactly
that.`,
		Example: `  gatehouse selftest --namespace gatehouse-system --deployment gatehouse --instance-name gatehouse --volume gatehouse-selftest`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := app.ValidateInstance(instance); err != nil {
				return usageError{fmt.Errorf("--instance-name: %w", err)}
			}
			if opts.Namespace == "" || opts.Deployment == "" {
				return usageError{fmt.Errorf("--namespace and --deployment are required")}
			}
			opts.ValidatingConfiguration, _ = webhookconfig.ConfigurationNames(instance)
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return fmt.Errorf("kubernetes client configuration: %w", err)
			}
			opts.Config = cfg
			opts.Out = cmd.OutOrStdout()
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return selftest.Run(ctx, opts)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&instance, "instance-name", webhookconfig.DefaultInstance, "The install's --instance-name (the chart's fullname).")
	fs.StringVar(&opts.Namespace, "namespace", envOr("POD_NAMESPACE", ""), "The install's namespace.")
	fs.StringVar(&opts.Deployment, "deployment", "", "The install's Deployment.")
	fs.StringVar(&opts.Volume, "volume", "", "Name of the probe PersistentVolume for pvsafe's check; empty skips it.")
	fs.DurationVar(&opts.Timeout, "timeout", 2*time.Minute, "How long to wait for the replicas and the probe volume.")
	fs.StringVar(&kubeconfig, "kubeconfig", "", "Path to a kubeconfig; default $KUBECONFIG, ~/.kube/config or the in-cluster configuration.")
	return cmd
}
