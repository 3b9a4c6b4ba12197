package module

import (
	"context"
	"io"
	"time"
)

// OfflineChecker is a module that checks documents of one kind without a
// cluster: configcheck runs an HAProxyTemplateConfig's embedded tests. cmd
// serves the check as `gatehouse <module> test`, and `gatehouse test` runs
// it on a file of its kind and on a suite's configChecks, finding the
// module through the catalogue: neither names it.
type OfflineChecker interface {
	Module
	OfflineCheck() OfflineCheck
}

// OfflineCheck declares a module's offline check.
type OfflineCheck struct {
	// Kind is the kind of the documents checked.
	Kind string
	// Command is `gatehouse <module> test`.
	Command OfflineCommand
	// SuiteFlags registers, on the flag set of `gatehouse test`, the
	// flags that configure the module's offline runs there. Optional.
	SuiteFlags func(fs *FlagSet)
	// Run checks data, a document of Kind: every test it embeds, or the
	// one named by req.Test. An error means the tests could not run (the
	// document is invalid, say); a failed test is a result.
	Run func(ctx context.Context, data []byte, req OfflineRequest) ([]OfflineResult, error)
}

// OfflineCommand is the help and the work of `gatehouse <module> test -f
// FILE`; cmd owns -f, reads the file and maps the outcome to the exit
// status: 0 every test passed, 1 a test failed, 2 the tests could not run.
type OfflineCommand struct {
	// GroupShort is the one-line help of `gatehouse <module>`.
	GroupShort string
	// Use, Short, Long and Example are the test command's help.
	Use, Short, Long, Example string
	// Flags registers the command's flags but -f on fs and returns Check,
	// which refuses a command line the command cannot run (exit status 2
	// with the usage hint), and Run, which checks data and writes the
	// report to w: passed says whether every test passed.
	Flags func(fs *FlagSet) (check func() error, run func(ctx context.Context, data []byte, w io.Writer) (passed bool, err error))
}

// OfflineRequest is what a caller asks of an offline check.
type OfflineRequest struct {
	// Test runs the test of this name alone; "" runs them all.
	Test string
	// Asks are the suite entry's own keys beyond file and test, as written
	// (configcheck reads allowLua). A suite is data, perhaps from a pull
	// request, so the module decides whether it may ask (never beyond what
	// the job's flags allow), and refuses a key it does not read.
	Asks map[string]any
}

// OfflineResult is one test of an offline check.
type OfflineResult struct {
	Name   string
	Passed bool
	// Failures say, one per line, what failed.
	Failures []string
	Duration time.Duration
}
