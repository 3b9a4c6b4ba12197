package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gatehouse-dev/gatehouse/internal/catalogue"
	"github.com/gatehouse-dev/gatehouse/internal/version"
)

// usageError is a command line Gatehouse cannot read (an unknown command,
// flag or argument): exit status 2, as Go's flag package and
// `gatehouse configcheck test` have always used for it.
type usageError struct{ error }

// exitStatus is a status a command chose for itself
// (`gatehouse configcheck test`: 1 when a test failed), with nothing to print.
type exitStatus int

func (s exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(s)) }

// execute runs the command line args and returns the process's exit status:
// 0 done (help included), 1 the server or a command failed, 2 a command line
// it cannot read, or what the command chose.
func execute(args []string, stdout, stderr io.Writer) int {
	root := newRootCommand()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteC()
	var status exitStatus
	var usage usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &status):
		return int(status)
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "Error: %v\nSee '%s --help' for usage.\n", usage.error, cmd.CommandPath())
		return 2
	}
	fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), err)
	return 1
}

const rootLong = `Gatehouse serves a Kubernetes platform's admission control: validating,
mutating and CRD-conversion webhooks, decided from informer caches.

Without a command it serves, as "gatehouse serve" does; its modules are
pvsafe, nodegroup, placement and configcheck (--modules). "gatehouse test"
runs suites of requests offline, decided by the modules' own code;
"gatehouse configcheck test" runs an HAProxyTemplateConfig's embedded tests
offline; "gatehouse uninstall" removes what an install wrote at run time;
"gatehouse selftest" checks an install from the API server's side (helm test);
"gatehouse sandbox-runner" starts configcheck's confined checks for a server
under another user (the chart's second container).`

func newRootCommand() *cobra.Command {
	serve, hidden := serveFlags(flag.CommandLine, catalogue.All())
	serverFlags := pflag.NewFlagSet("gatehouse", pflag.ContinueOnError)
	serverFlags.AddGoFlagSet(flag.CommandLine)
	for _, name := range hidden {
		_ = serverFlags.MarkHidden(name)
	}
	root := &cobra.Command{
		Use:   "gatehouse",
		Short: "Admission control for a Kubernetes platform, decided from informer caches",
		Long:  rootLong,
		Example: `  gatehouse --modules=pvsafe,nodegroup --cert-secret=gatehouse-system/gatehouse-tls
  gatehouse serve --modules=configcheck --enforcement=configcheck=warn
  gatehouse configcheck test -f config.yaml --output json`,
		Args:          noArgs,
		RunE:          func(*cobra.Command, []string) error { return serve() },
		SilenceErrors: true,
		SilenceUsage:  true,
		// --version prints it (cobra's flag), as does `gatehouse version`.
		Version: version.Get().String(),
	}
	root.SetVersionTemplate("gatehouse {{.Version}}\n")
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.Flags().AddFlagSet(serverFlags)
	root.AddCommand(&cobra.Command{
		Use:   "serve",
		Short: "Serve the webhooks (what gatehouse does without a command)",
		Long: `Serve the enabled modules' webhooks over HTTPS, with /healthz, /readyz and
Prometheus metrics. "gatehouse" without a command does the same.`,
		Args: noArgs,
		RunE: func(*cobra.Command, []string) error { return serve() },
	})
	root.Commands()[0].Flags().AddFlagSet(serverFlags)
	root.AddCommand(newOfflineCommands()...)
	root.AddCommand(newTestCommand())
	root.AddCommand(newUninstallCommand())
	root.AddCommand(newSelftestCommand())
	root.AddCommand(newSandboxRunnerCommand())
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print Gatehouse's version, source revision and Go version",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "gatehouse %s\n", version.Get())
			return err
		},
	})
	return root
}

// noArgs refuses words that name no command: before, "gatehouse help" and
// a typo started the server.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath())}
	}
	return nil
}
