package configcheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/sandbox"
)

// Settings are the module's settings (module.Configurable): the json
// fields of Options, defaulted by New.
func (m *Module) Settings() any { return &m.opts }

// simulateNoLandlockFlag starts the module as on a kernel without Landlock
// (docs/testing.md): hidden from --help, it is no setting for a cluster.
const simulateNoLandlockFlag = "configcheck-simulate-no-landlock"

// Flags declares the server's flags of the settings, the older
// --configcheck-allow-unconfined, --sandbox-landlock-abi and the hidden
// --configcheck-simulate-no-landlock.
func (m *Module) Flags(fs *module.FlagSet) {
	fs.BoolVar(&m.opts.AllowLua, "configcheck-allow-lua", m.opts.AllowLua, "Let configcheck renderings load Lua (lua-load, lua-load-per-thread, lua-prepend-path); haproxy -c runs Lua while parsing, so only for platforms whose HAProxy needs it. The check stays confined.")
	fs.Func("configcheck-confinement", "required (default): configcheck does not start where the kernel cannot confine haproxy -c and the render workers (no Landlock or no seccomp filters), and fails alone; bestEffort: it starts with what the kernel has (gatehouse_configcheck_confinement says what, an alert fires, and Lua is refused without Landlock).", func(s string) error {
		if s != ConfinementRequired && s != ConfinementBestEffort {
			return fmt.Errorf("%q: want %s or %s", s, ConfinementRequired, ConfinementBestEffort)
		}
		m.opts.Confinement = s
		return nil
	})
	fs.StringVar(&m.opts.RunnerDir, "sandbox-runner-dir", m.opts.RunnerDir, "Directory `DIR` shared with a gatehouse sandbox-runner running as another user (the chart's second container): configcheck's checks and renderings run under that user, without the server's files and token. Required under --configcheck-confinement=required once given: an unreachable runner fails the module alone.")
	fs.StringVar(&m.opts.RunnerUser, "sandbox-runner-user", m.opts.RunnerUser, "UID:GID, for a server running as root (make run): start a sandbox runner as a child under that user and group, and run configcheck's checks and renderings through it (docs/configcheck.md, \"Separate identity\").")
	fs.BoolVar(&m.opts.AllowUnconfined, "configcheck-allow-unconfined", m.opts.AllowUnconfined, "Same as --configcheck-confinement=bestEffort.")
	landlockABIFlag(fs)
	fs.BoolFunc(simulateNoLandlockFlag, "Hidden, for tests: configcheck starts as on a kernel without Landlock (it then fails alone unless --configcheck-allow-unconfined; the other modules serve).", func(string) error {
		m.opts.Kernel = func() sandbox.Capabilities {
			c := sandbox.Available()
			c.LandlockABI, c.LandlockReason = 0, "simulated by --"+simulateNoLandlockFlag
			return c
		}
		return nil
	})
	fs.Hide(simulateNoLandlockFlag)
}

// landlockABIFlag is --sandbox-landlock-abi: it confines the checks and
// renderings as an older kernel would. Nodes run Landlock ABI 0 (the LSM
// not enabled), 1 (Ubuntu 22.04), 3 (Azure Linux 3.0), 4 (Ubuntu 24.04) and
// so on; this reproduces a node's confinement on a newer kernel, for an
// operator who wants to see what a config can do there, and for the tests
// that attack at every level. It applies at once: the module reads
// sandbox.Available when it starts, after the flags.
func landlockABIFlag(fs *module.FlagSet) {
	fs.Func("sandbox-landlock-abi", "Confine configcheck's checks and renderings as a kernel offering at most this Landlock ABI would (0: no Landlock), with the gaps closed as on such a kernel: to reproduce a node's confinement on a newer kernel (docs/configcheck.md, Kernels and platforms). Default: the kernel's own.", func(s string) error {
		abi, err := strconv.Atoi(s)
		if err != nil || abi < 0 {
			return fmt.Errorf("%q: want a Landlock ABI version, 0 or more", s)
		}
		sandbox.LimitLandlockABI(abi)
		return nil
	})
}

// Validate refuses a confinement mode the module does not know.
func (o *Options) Validate(path *field.Path) field.ErrorList {
	switch o.Confinement {
	case "", ConfinementRequired, ConfinementBestEffort:
		return nil
	}
	return field.ErrorList{field.NotSupported(path.Child("confinement"), o.Confinement, []string{ConfinementRequired, ConfinementBestEffort})}
}

// OfflineCheck is `gatehouse configcheck test` and what `gatehouse test`
// runs of an HAProxyTemplateConfig: its embedded tests, with the engine
// and the haproxy -c the webhook uses, without a cluster.
func (m *Module) OfflineCheck() module.OfflineCheck {
	return module.OfflineCheck{
		Kind: "HAProxyTemplateConfig",
		Command: module.OfflineCommand{
			GroupShort: "Work with HAProxyTemplateConfigs offline",
			Use:        "test -f FILE",
			Short:      "Run an HAProxyTemplateConfig's embedded tests without a cluster",
			Long: `Run the embedded tests of an HAProxyTemplateConfig with the engine and the
haproxy -c the webhook uses, without a cluster.

Exit status: 0 every test passed, 1 a test failed, 2 the tests could not run
(the config does not compile, no such test, no haproxy, a bad flag).`,
			Example: `  gatehouse configcheck test -f config.yaml
  gatehouse configcheck test -f config.yaml --test ok-single-ingress --output json
  gatehouse configcheck test -f - --dump-rendered rendered/ < config.yaml`,
			Flags: offlineCommandFlags,
		},
		SuiteFlags: m.suiteFlags,
		Run:        m.runOffline,
	}
}

// haproxyRootHelp describes --haproxy-root.
const haproxyRootHelp = "An unpacked root file system holding haproxy and its libraries (e.g. Debian 13's haproxy 3.0 package and its dependencies, unpacked on an older distribution), run through the root's own loader and libraries; --haproxy-binary is then haproxy's path inside the root (default /usr/sbin/haproxy)."

// offlineCommandFlags are the flags of `gatehouse configcheck test`.
func offlineCommandFlags(fs *module.FlagSet) (func() error, func(context.Context, []byte, io.Writer) (bool, error)) {
	var opts OfflineOptions
	fs.StringVar(&opts.Test, "test", "", "Run only the test of this name.")
	fs.StringVar(&opts.Output, "output", "summary", "Report format: summary or json.")
	fs.StringVar(&opts.DumpRendered, "dump-rendered", "", "Write each test's rendering under DIR/<test>/.")
	fs.BoolVar(&opts.AllowLua, "allow-lua", false, "Apply the check policy as a cluster running with --configcheck-allow-lua does.")
	fs.StringVar(&opts.HAProxyBinary, "haproxy-binary", "", "haproxy executable (default: from PATH, else /usr/sbin/haproxy).")
	fs.StringVar(&opts.HAProxyRoot, "haproxy-root", "", haproxyRootHelp)
	check := func() error {
		if opts.Output != "summary" && opts.Output != "json" {
			return fmt.Errorf("--output %q: want summary or json", opts.Output)
		}
		return nil
	}
	run := func(ctx context.Context, data []byte, w io.Writer) (bool, error) {
		return TestOffline(ctx, data, opts, w)
	}
	return check, run
}

// suiteFlags are the flags of `gatehouse test` that configure this
// instance for offline runs. Such a run is confined as far as the kernel
// allows, as `gatehouse configcheck test` runs it, on CI runners whose
// kernel may have no Landlock: `gatehouse test` says how confined.
func (m *Module) suiteFlags(fs *module.FlagSet) {
	m.opts.AllowUnconfined = true
	fs.StringVar(&m.opts.HAProxyBinary, "haproxy-binary", m.opts.HAProxyBinary, "haproxy executable for configcheck tests (default: from PATH, else /usr/sbin/haproxy).")
	fs.StringVar(&m.opts.HAProxyRoot, "haproxy-root", m.opts.HAProxyRoot, haproxyRootHelp)
	fs.BoolVar(&m.opts.AllowLua, "allow-lua", m.opts.AllowLua, "Check HAProxyTemplateConfigs as a cluster running with --configcheck-allow-lua does.")
	landlockABIFlag(fs)
}

// offlineAsks reads what a suite's configChecks entry asks of configcheck:
// allowLua alone, a boolean.
func offlineAsks(asks map[string]any) (allowLua bool, err error) {
	for key, value := range asks {
		switch b, ok := value.(bool); {
		case key == "allowLua" && ok:
			allowLua = b
		case key == "allowLua":
			return false, fmt.Errorf("configChecks entry: allowLua is %v; want true or false", value)
		default:
			return false, fmt.Errorf("configChecks entry: configcheck reads file, test and allowLua, not %q", key)
		}
	}
	return allowLua, nil
}

// runOffline runs a config's embedded tests for `gatehouse test`, each a
// result.
func (m *Module) runOffline(ctx context.Context, data []byte, req module.OfflineRequest) ([]module.OfflineResult, error) {
	// A suite is data, perhaps from a pull request: it may say that its
	// config needs Lua, never allow it.
	allowLua, err := offlineAsks(req.Asks)
	if err != nil {
		return nil, err
	}
	if allowLua && !m.opts.AllowLua {
		return nil, errors.New("the suite sets allowLua, but a suite cannot allow Lua for itself (it may come from a pull request): " +
			"the job running it decides, with gatehouse test --allow-lua")
	}
	report, err := RunOffline(ctx, data, OfflineOptions{Test: req.Test, AllowLua: m.opts.AllowLua, HAProxyBinary: m.opts.HAProxyBinary, HAProxyRoot: m.opts.HAProxyRoot})
	if err != nil {
		return nil, err
	}
	var out []module.OfflineResult
	for _, r := range report.Results {
		res := module.OfflineResult{Name: r.Name, Passed: r.Passed, Duration: r.Duration}
		if r.RenderError != "" {
			res.Failures = append(res.Failures, "rendering failed: "+r.RenderError)
		}
		for _, f := range r.Failures {
			res.Failures = append(res.Failures, f.Assertion+": "+f.Message)
		}
		out = append(out, res)
	}
	return out, nil
}
