package main

import (
	"context"
	"fmt"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/uninstall"
	"github.com/gatehouse-dev/gatehouse/internal/webhookconfig"
)

// newUninstallCommand is `gatehouse uninstall`: what Helm cannot remove
// because Gatehouse wrote it at run time. The chart runs it as a pre-delete
// hook; a person runs it as the break-glass equivalent.
func newUninstallCommand() *cobra.Command {
	var (
		opts       uninstall.Options
		kubeconfig string
	)
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove what one install wrote at run time: webhook configurations and conversion stanzas",
		Long: `Remove what one Gatehouse install wrote at run time, which helm uninstall
does not own:

 1. scale --deployment to zero and wait until its Pods end, so that no replica
    writes back what the next steps remove (an absent Deployment is skipped);
 2. delete the ValidatingWebhookConfigurations and MutatingWebhookConfigurations
    labelled gatehouse.dev/instance=<--instance-name> (never another install's);
 3. set the conversion of the CRDs annotated gatehouse.dev/conversion-owner=
    <--instance-name> back to strategy None.

Before step 1 it checks that every such CRD stores its objects in its storage
version alone; otherwise it changes nothing and says what to do. Running it
again finds nothing left to do.`,
		Example: `  gatehouse uninstall --namespace gatehouse-system --instance-name gatehouse --deployment gatehouse`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := app.ValidateInstance(opts.Instance); err != nil {
				return usageError{fmt.Errorf("--instance-name: %w", err)}
			}
			if opts.Deployment != "" && opts.Namespace == "" {
				return usageError{fmt.Errorf("--deployment needs --namespace")}
			}
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return fmt.Errorf("kubernetes client configuration: %w", err)
			}
			scheme := runtime.NewScheme()
			for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, appsv1.AddToScheme} {
				if err := add(scheme); err != nil {
					return err
				}
			}
			if opts.Client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
				return err
			}
			opts.Out = cmd.OutOrStdout()
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return uninstall.Run(ctx, opts)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&opts.Instance, "instance-name", webhookconfig.DefaultInstance, "The install's --instance-name (the chart's fullname).")
	fs.StringVar(&opts.Namespace, "namespace", envOr("POD_NAMESPACE", ""), "The install's namespace, where --deployment runs.")
	fs.StringVar(&opts.Deployment, "deployment", "", "The install's Deployment, scaled to zero first; empty or absent skips that step.")
	fs.DurationVar(&opts.Timeout, "timeout", 2*time.Minute, "How long to wait for the Deployment's Pods to end.")
	fs.StringVar(&kubeconfig, "kubeconfig", "", "Path to a kubeconfig; default $KUBECONFIG, ~/.kube/config or the in-cluster configuration.")
	return cmd
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	return ctrl.GetConfig()
}
