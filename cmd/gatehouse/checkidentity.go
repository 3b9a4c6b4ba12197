package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/gatehouse-dev/gatehouse/internal/sandbox"
)

// checksUnprivileged makes the offline commands, run as root (a CI job's
// container, a developer's sudo), start configcheck's checks and render
// workers through a sandbox runner under nobody that gives each process a
// user of its own (sandbox.StartRunner), as make run's server does: a
// confined process then shares no user id with the machine's root
// processes, which the kernel would otherwise let it act on (resource
// limits, IPC, signals where seccomp or Landlock miss one), nor with root's
// files. It returns what undoes it. Not root, it does nothing: the checks
// run as the command's user, which is no one else's business. Where no
// check can run at all (not Linux), there is nothing to start. A runner that
// cannot start (a user namespace without nobody) is said on w and the
// checks run as root, confined as before; strict says it is an error
// instead (--require-confinement).
func checksUnprivileged(ctx context.Context, command string, w io.Writer, strict bool) (func(), error) {
	if os.Geteuid() != 0 || sandbox.Available().Unsupported != "" {
		return func() {}, nil
	}
	r, err := sandbox.StartRunner(ctx, sandbox.RunnerOptions{})
	if err != nil {
		if strict {
			return nil, fmt.Errorf("%s: --require-confinement: running as root, configcheck's checks could not be started under another user: %w", command, err)
		}
		fmt.Fprintf(w, "%s: running as root, configcheck's checks and renderings run as root (confined, without capabilities): a runner under another user could not start: %v\n", command, err)
		return func() {}, nil
	}
	sandbox.UseRunner(r)
	return func() {
		sandbox.UseRunner(nil)
		_ = r.Close()
	}, nil
}

// identityNote says, for the confinement line, which users the checks run
// as when that is not the command's own.
func identityNote(caps sandbox.Capabilities) string {
	switch {
	case caps.ProcessUIDs.Count > 0:
		return fmt.Sprintf("; each as a user of its own (%v, group %d), not root", caps.ProcessUIDs, caps.RunnerGID)
	case caps.SeparateIdentity:
		return fmt.Sprintf("; as user %d:%d, not root", caps.RunnerUID, caps.RunnerGID)
	}
	return ""
}
