package main

import (
	"context"
	"errors"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/gatehouse-dev/gatehouse/internal/sandbox"
)

// newSandboxRunnerCommand is `gatehouse sandbox-runner`: the chart's second
// container, under another user than the server, without the
// ServiceAccount token, that starts configcheck's confined checks and
// render workers for the server (docs/configcheck.md, "Separate identity").
func newSandboxRunnerCommand() *cobra.Command {
	var (
		dir      string
		serveUID int
	)
	cmd := &cobra.Command{
		Use:   "sandbox-runner",
		Short: "Start configcheck's confined processes for the server, under this process's user",
		Long: `Listen on DIR/runner.sock and start the confined processes (haproxy -c,
render workers) that a Gatehouse server running as --serve-uid asks for,
under this process's user and group, with the standard input, output and
error the server passes. Requests of any other user are refused
(SO_PEERCRED). Run it as another user than the server, in a container
without the server's files and ServiceAccount token, sharing DIR (an
emptyDir) with the server, which names it with --sandbox-runner-dir.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" || serveUID < 0 {
				return usageError{errors.New("--dir and --serve-uid are required")}
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return sandbox.ServeRunner(ctx, dir, serveUID)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "Directory shared with the server: the socket runner.sock and the work directory the server writes checks into.")
	cmd.Flags().IntVar(&serveUID, "serve-uid", -1, "The server's user id, the only one served.")
	return cmd
}
