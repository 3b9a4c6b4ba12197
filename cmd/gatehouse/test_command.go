package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gatehouse-dev/gatehouse/internal/catalogue"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/policytest"
	"github.com/gatehouse-dev/gatehouse/internal/sandbox"
)

// newTestCommand is `gatehouse test`: suites of requests decided offline by
// the code the server runs, for a GitOps repository's CI before a change is
// merged (docs/testing-policies.md). Exit status: 0 every test passed, 1 a
// test failed, 2 a suite could not run.
func newTestCommand() *cobra.Command {
	offline := newOfflineModules()
	var (
		files   []string
		output  string
		verbose bool
		// requireConfinement: refuse to run where the kernel cannot
		// confine configcheck's checks fully.
		requireConfinement bool
	)
	cmd := &cobra.Command{
		Use:   "test -f FILE [-f FILE ...]",
		Short: "Run test suites of admission and conversion requests without a cluster",
		Long: `Run test suites (gatehouse.dev/v1alpha1 TestSuite): each declares a cluster
state, requests (admission or conversion) and what their answers must be.
Every module a suite uses is set up over its state and decides each request
through the webhook server's own handlers, as in a cluster
(docs/testing-policies.md).

A file may also be an HAProxyTemplateConfig: its embedded validation tests
run, as "gatehouse configcheck test" runs them.

Exit status: 0 every test passed, 1 a test failed, 2 a suite could not run
(invalid, or an error while running it).`,
		Example: `  gatehouse test -f examples/pvsafe/suite.yaml
  gatehouse test -f suites/a.yaml -f suites/b.yaml --output junit > report.xml
  gatehouse test -f lb/config.yaml`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return usageError{errors.New("-f is required")}
			}
			if !slices.Contains(policytest.Outputs, output) {
				return usageError{fmt.Errorf("--output %q: want %s", output, strings.Join(policytest.Outputs, ", "))}
			}
			log := logr.Discard()
			if verbose {
				log = zap.New(zap.WriteTo(cmd.ErrOrStderr()), zap.UseDevMode(true))
			}
			// Caches and clients log through controller-runtime's global
			// logger; unset, it complains after 30 s.
			logf.SetLogger(log)
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			undo, err := checksUnprivileged(ctx, cmd.CommandPath(), cmd.ErrOrStderr(), requireConfinement)
			if err != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), err)
				return exitStatus(2)
			}
			defer undo()
			// One line, always: a CI log says what a suite from a pull
			// request could do on this runner.
			caps := sandbox.Available()
			fmt.Fprintln(cmd.ErrOrStderr(), confinementLine(cmd.CommandPath(), caps))
			if requireConfinement {
				if err := confinementRequired(cmd.CommandPath(), caps); err != nil {
					fmt.Fprintln(cmd.ErrOrStderr(), err)
					return exitStatus(2)
				}
			}
			opts := policytest.Options{Modules: offline.fresh, Checks: offline.checks, Log: log}
			results := runTestFiles(ctx, cmd.InOrStdin(), files, opts)
			if err := policytest.Write(cmd.OutOrStdout(), output, results); err != nil {
				return err
			}
			if output != policytest.OutputSummary {
				// Machine-readable output stays parseable; errors go to
				// standard error too.
				for _, r := range results {
					if r.Err != nil {
						fmt.Fprintf(cmd.ErrOrStderr(), "%s: %v\n", cmd.CommandPath(), r.Err)
					}
				}
			}
			if status := policytest.Status(results); status != 0 {
				return exitStatus(status)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringArrayVarP(&files, "filename", "f", nil, "Suite file, or HAProxyTemplateConfig, to run (- for standard input); repeat for more.")
	fs.StringVar(&output, "output", policytest.OutputSummary, "Report format: summary, json or junit.")
	fs.BoolVar(&requireConfinement, "require-confinement", false, "Exit 2 unless configcheck's checks and renderings can run fully confined (Landlock and seccomp filters): for CI jobs that run suites from pull requests.")
	fs.AddGoFlagSet(offline.flags)
	for _, name := range offline.hidden {
		_ = fs.MarkHidden(name)
	}
	fs.BoolVarP(&verbose, "verbose", "v", false, "Log the server's and the modules' work (each decision among it) to standard error.")
	return cmd
}

// confinementLine says how confined configcheck's checks and renderings
// run here.
func confinementLine(command string, caps sandbox.Capabilities) string {
	if caps.Unsupported != "" {
		return fmt.Sprintf("%s: configcheck checks and renderings cannot run here (%s): its documents and suites fail; the other modules' run; "+
			"run configcheck's suites on Linux (the release's image runs gatehouse test)", command, caps.Unsupported)
	}
	if caps.Complete() {
		return fmt.Sprintf("%s: configcheck checks and renderings run fully confined (Landlock ABI %d, seccomp%s)", command, caps.LandlockABI, identityNote(caps))
	}
	return fmt.Sprintf("%s: configcheck checks and renderings run with less confinement than in a cluster (Landlock ABI %d, seccomp %v%s; missing: %s): "+
		"a suite from an untrusted source can do more on this machine; use --require-confinement in jobs that run such suites",
		command, caps.LandlockABI, caps.Seccomp, identityNote(caps), strings.Join(caps.Missing(), "; "))
}

// confinementRequired is --require-confinement's refusal where the
// confinement is not complete.
func confinementRequired(command string, caps sandbox.Capabilities) error {
	if caps.Complete() {
		return nil
	}
	if caps.Unsupported != "" {
		return fmt.Errorf("%s: --require-confinement: configcheck's checks and renderings cannot run here (%s)", command, caps.Unsupported)
	}
	return fmt.Errorf("%s: --require-confinement: this kernel cannot confine configcheck's checks and renderings fully (missing: %s); "+
		"run the job on a runner whose kernel has the landlock LSM enabled (Linux 5.13 or later)", command, strings.Join(caps.Missing(), "; "))
}

// runTestFiles runs each file: a document a module checks offline, or a
// TestSuite.
func runTestFiles(ctx context.Context, stdin io.Reader, files []string, opts policytest.Options) []policytest.SuiteResult {
	var results []policytest.SuiteResult
	for _, file := range files {
		var (
			data []byte
			err  error
		)
		if file == "-" {
			data, err = io.ReadAll(stdin)
		} else {
			data, err = os.ReadFile(file)
		}
		if err != nil {
			results = append(results, policytest.SuiteResult{Name: file, File: file, Err: err})
			continue
		}
		results = append(results, policytest.RunFile(ctx, file, data, opts))
	}
	return results
}

// offlineModules are the modules as `gatehouse test` configures them: the
// flags their offline checks declare (module.OfflineCheck.SuiteFlags) are
// registered on the command, bound to one instance of each module, whose
// checks run the documents; each suite's fresh instances are given the
// same flags again. Modules take the server's defaults otherwise.
type offlineModules struct {
	flags  *flag.FlagSet
	hidden []string
	given  *module.CommandFlags
	checks map[string]module.OfflineCheck
}

func newOfflineModules() *offlineModules {
	o := &offlineModules{flags: flag.NewFlagSet("test", flag.ContinueOnError)}
	o.given, o.hidden, o.checks = policytest.AddFlags(o.flags, catalogue.All())
	return o
}

// fresh returns a fresh instance of every module, configured by the flags
// given (set once already when the command line was parsed: they cannot
// fail now).
func (o *offlineModules) fresh() []module.Module {
	mods := catalogue.All()
	_ = o.given.Replay(mods)
	return mods
}
