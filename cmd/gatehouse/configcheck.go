package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck"
)

// configcheckCommand runs `gatehouse configcheck test`: a config's embedded
// tests, offline, for a user's CI before the config is applied. Exit status:
// 0 every test passed, 1 a test failed, 2 the tests could not run.
func configcheckCommand(args []string) int {
	if len(args) == 0 || args[0] != "test" {
		fmt.Fprintln(os.Stderr, "usage: gatehouse configcheck test -f config.yaml [--test NAME] [--output summary|json] [--dump-rendered DIR] [--haproxy-binary PATH] [--allow-lua]")
		return 2
	}
	fs := flag.NewFlagSet("gatehouse configcheck test", flag.ContinueOnError)
	var (
		file string
		opts configcheck.OfflineOptions
	)
	fs.StringVar(&file, "f", "", "HAProxyTemplateConfig YAML file (- for standard input).")
	fs.StringVar(&opts.Test, "test", "", "Run only the test of this name.")
	fs.StringVar(&opts.Output, "output", "summary", "Report format: summary or json.")
	fs.StringVar(&opts.DumpRendered, "dump-rendered", "", "Write each test's rendering under DIR/<test>/.")
	fs.BoolVar(&opts.AllowLua, "allow-lua", false, "Apply the check policy as a cluster running with --configcheck-allow-lua does.")
	fs.StringVar(&opts.HAProxyBinary, "haproxy-binary", "", "haproxy executable (default: from PATH, else /usr/sbin/haproxy).")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if file == "" {
		fmt.Fprintln(os.Stderr, "gatehouse configcheck test: -f is required")
		return 2
	}
	var (
		data []byte
		err  error
	)
	if file == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gatehouse configcheck test:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	passed, err := configcheck.TestOffline(ctx, data, opts, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gatehouse configcheck test:", err)
		return 2
	}
	if !passed {
		return 1
	}
	return 0
}
