package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck"
)

func newConfigcheckCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "configcheck",
		Short: "Work with HAProxyTemplateConfigs offline",
		Args:  noArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newConfigcheckTestCommand())
	return cmd
}

// newConfigcheckTestCommand is `gatehouse configcheck test`: a config's
// embedded tests, offline, for a user's CI before the config is applied.
// Exit status: 0 every test passed, 1 a test failed, 2 the tests could not
// run.
func newConfigcheckTestCommand() *cobra.Command {
	var (
		file string
		opts configcheck.OfflineOptions
	)
	cmd := &cobra.Command{
		Use:   "test -f FILE",
		Short: "Run an HAProxyTemplateConfig's embedded tests without a cluster",
		Long: `Run the embedded tests of an HAProxyTemplateConfig with the engine and the
haproxy -c the webhook uses, without a cluster.

Exit status: 0 every test passed, 1 a test failed, 2 the tests could not run
(the config does not compile, no such test, no haproxy, a bad flag).`,
		Example: `  gatehouse configcheck test -f config.yaml
  gatehouse configcheck test -f config.yaml --test ok-single-ingress --output json
  gatehouse configcheck test -f - --dump-rendered rendered/ < config.yaml`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return usageError{errors.New("-f is required")}
			}
			if opts.Output != "summary" && opts.Output != "json" {
				return usageError{fmt.Errorf("--output %q: want summary or json", opts.Output)}
			}
			return configcheckTest(cmd, file, opts)
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&file, "filename", "f", "", "HAProxyTemplateConfig YAML file (- for standard input).")
	fs.StringVar(&opts.Test, "test", "", "Run only the test of this name.")
	fs.StringVar(&opts.Output, "output", "summary", "Report format: summary or json.")
	fs.StringVar(&opts.DumpRendered, "dump-rendered", "", "Write each test's rendering under DIR/<test>/.")
	fs.BoolVar(&opts.AllowLua, "allow-lua", false, "Apply the check policy as a cluster running with --configcheck-allow-lua does.")
	fs.StringVar(&opts.HAProxyBinary, "haproxy-binary", "", "haproxy executable (default: from PATH, else /usr/sbin/haproxy).")
	return cmd
}

// configcheckTest runs the tests: an error the tests could not run exits 2,
// a failed test 1.
func configcheckTest(cmd *cobra.Command, file string, opts configcheck.OfflineOptions) error {
	var (
		data []byte
		err  error
	)
	if file == "-" {
		data, err = io.ReadAll(cmd.InOrStdin())
	} else {
		data, err = os.ReadFile(file)
	}
	if err == nil {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		var passed bool
		if passed, err = configcheck.TestOffline(ctx, data, opts, cmd.OutOrStdout()); err == nil {
			if !passed {
				return exitStatus(1)
			}
			return nil
		}
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "%s: %v\n", cmd.CommandPath(), err)
	return exitStatus(2)
}
