package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/gatehouse-dev/gatehouse/internal/catalogue"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// newOfflineCommands are `gatehouse <module> test` for every module that
// declares an offline check (module.OfflineChecker): configcheck's runs an
// HAProxyTemplateConfig's embedded tests, for a user's CI before the
// config is applied. The module gives the help, the flags and the work;
// this file, the command line and the exit status: 0 every test passed, 1
// a test failed, 2 the tests could not run.
func newOfflineCommands() []*cobra.Command {
	var out []*cobra.Command
	for _, m := range catalogue.All() {
		checker, ok := m.(module.OfflineChecker)
		if !ok {
			continue
		}
		check := checker.OfflineCheck()
		if check.Command.Flags == nil {
			continue // gatehouse test runs it; no command of its own
		}
		cmd := &cobra.Command{
			Use:   m.Name(),
			Short: check.Command.GroupShort,
			Args:  noArgs,
			RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
		}
		cmd.AddCommand(newOfflineTestCommand(check))
		out = append(out, cmd)
	}
	return out
}

func newOfflineTestCommand(check module.OfflineCheck) *cobra.Command {
	var file string
	own := module.NewFlagSet("test")
	valid, run := check.Command.Flags(own)
	cmd := &cobra.Command{
		Use:     check.Command.Use,
		Short:   check.Command.Short,
		Long:    check.Command.Long,
		Example: check.Command.Example,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return usageError{errors.New("-f is required")}
			}
			if err := valid(); err != nil {
				return usageError{err}
			}
			return offlineTest(cmd, file, run)
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&file, "filename", "f", "", check.Kind+" YAML file (- for standard input).")
	fs.AddGoFlagSet(own.FlagSet)
	hideFlags(cmd, own)
	return cmd
}

// hideFlags keeps the flags a module hid (module.FlagSet.Hide) out of
// cmd's --help.
func hideFlags(cmd *cobra.Command, own *module.FlagSet) {
	own.VisitAll(func(f *flag.Flag) {
		if own.Hidden(f.Name) {
			_ = cmd.Flags().MarkHidden(f.Name)
		}
	})
}

// offlineTest runs the tests: an error the tests could not run exits 2,
// a failed test 1.
func offlineTest(cmd *cobra.Command, file string, run func(context.Context, []byte, io.Writer) (bool, error)) error {
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
		undo, _ := checksUnprivileged(ctx, cmd.CommandPath(), cmd.ErrOrStderr(), false)
		defer undo()
		var passed bool
		if passed, err = run(ctx, data, cmd.OutOrStdout()); err == nil {
			if !passed {
				return exitStatus(1)
			}
			return nil
		}
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "%s: %v\n", cmd.CommandPath(), err)
	return exitStatus(2)
}
