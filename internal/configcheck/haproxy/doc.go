// Package haproxy is configcheck's last phase: it runs the real haproxy
// binary, "haproxy -c", on a rendering ([render.Output]) and turns the
// result into a [Verdict] whose Message can be an admission denial reason.
//
// # Why it works the way it does
//
//   - Each run gets a private directory (os.MkdirTemp under
//     [Options].TempDir, named gatehouse-haproxy-*, mode 0700, files 0600),
//     removed afterwards. haproxy runs with that directory as its working
//     directory and is given the basename only, "haproxy -c -f haproxy.cfg",
//     so its messages say [haproxy.cfg:N] and never carry a temporary path
//     ([Simplify] removes one anyway, should a message ever contain it).
//   - The run is bound to the caller's context: haproxy is started in its
//     own process group, and when the context ends the whole group is
//     killed (SIGKILL), so neither haproxy nor anything it started outlives
//     the check, and Check returns at once. (The upstream haptic controller
//     started haproxy without a context, so a deadline could not stop it.)
//   - Runs are bounded: at most [Options].MaxConcurrent at once, the others
//     wait (honouring their context), in their share's turn (package fair:
//     the check's party and class, fair.WithShare): real changes first,
//     parties in turn, and the less urgent classes (dry runs, reviews from
//     unverified callers, configs being written) on all slots but one, so
//     that a real change never waits behind them for a slot.
//   - A check that is not expected to finish before its context's deadline
//     is refused at once with [ErrBusy], instead of waiting in the queue: the
//     expected wait is (checks queued or running ahead / MaxConcurrent + 1)
//     runs of the average duration (a weighted average of measured runs,
//     100ms before the first). The webhook can then answer within its own
//     budget, before the API server's timeout fires and failurePolicy
//     decides in its place. A check waiting for an identical run (see
//     below) is refused the same way when that run is expected to end after
//     its deadline.
//   - Verdicts, valid and invalid, are remembered by [Checksum] (an LRU of
//     [Options].CacheSize): a change that renders identically, such as a
//     label the templates do not read, skips haproxy. Concurrent identical
//     checks share one run. Errors (refusals, cancellations, failures to
//     start) are never remembered.
//   - DNS is strict: no -dr, so a server name that does not resolve is an
//     error, as the admission check should report it.
//   - haproxy's environment is [DefaultEnv] (PATH only) unless
//     [Options].Env says otherwise: a "${VAR}" in a config cannot copy the
//     controller's environment into a denial message.
//
// # Directory layout
//
// The private directory holds
//
//	haproxy.cfg       render.Output.HAProxyConfig
//	maps/<name>       render.Output.Maps
//	general/<name>    render.Output.Files
//	ssl/<name>        render.Output.Certs
//
// Names are single path elements: empty, ".", ".." and names containing "/"
// (or NUL) are refused with an invalid Verdict naming them, before any run.
// Templates refer to the files by these paths relative to the directory of
// haproxy.cfg, e.g. map(maps/hosts.map), "crt ssl/site.pem",
// "errorfile 503 general/503.http", and should say, in global,
//
//	default-path config
//
// so that haproxy resolves relative paths against the directory of the
// configuration file rather than its working directory when the same
// configuration is deployed.
//
// What haproxy 2.6.12 (Debian's package; 3.0.11 alike) was observed to do, running
// "haproxy -c -f /abs/dir/haproxy.cfg" from another working directory:
// with "default-path config", "crt ssl/x.pem", "errorfile ... general/x",
// "http-request return ... file general/x", "acl ... -f maps/x" and map()
// in acl, set-var, set-header and "if { ... }" conditions are all found.
// map() inside a dynamic "use_backend %[...]" rule is not: that expression
// is resolved after parsing, once default-path has stopped applying, so it
// is looked up relative to the working directory ("failed to open pattern
// file <maps/x.map>"). Without default-path, every relative path is
// relative to the working directory. This checker runs haproxy with the
// configuration's directory as its working directory, so all of these
// forms pass here with or without default-path; the deployed haproxy must
// likewise start with the configuration's directory as its working
// directory for "use_backend %[...map(maps/...)]" to work. "default-path
// origin <dir>" makes paths relative to <dir>, not to the checked
// directory, and is not rewritten: do not use it in templates.
//
// # Check policy
//
// haproxy -c is not a passive parser: it runs Lua (lua-load) while it
// reads the configuration, opens every file the configuration names, and
// quotes what it read in its errors, which become the denial a tenant
// sees. The rendering is hostile input (the config author writes the
// templates, tenants control fields they print), so before haproxy runs it
// must pass a [Policy], which holds on its own, without the process
// confinement:
//
//   - no Lua (lua-load, lua-load-per-thread, lua-prepend-path), unless
//     [Policy].AllowLua, an administrator's switch; their files must still
//     be inside the directory;
//   - no external commands (external checks, program sections,
//     insecure-fork-wanted, insecure-setuid-wanted), no setenv family, no
//     shared objects (ssl-engine, ssl-provider, ssl-provider-path), no
//     OpenTracing filter (its configuration names a tracer plugin);
//   - no environment expansion ("$X" inside double quotes): the check runs
//     without the controller's environment, so "${X}/etc/passwd" would read
//     /etc/passwd;
//   - no setcap or trace (haproxy 3.0): kept capabilities, developer
//     traces copying traffic;
//   - every file or directory argument of every haproxy 2.6 and 3.0
//     keyword, bind or server option, action and converter that takes one
//     (the table in policy_keywords.go, with the manual's section of each
//     entry) is a relative path without ".." (after cleaning), "~" or NUL,
//     also once crt-base, ca-base, key-base or server-state-base prefix it
//     (and those must be inside themselves), and a pattern file's name also
//     after a "file@", "opt@" or "virt@" prefix, which 3.0 strips;
//     "default-path parent|origin" is refused, "config" and "current" both
//     mean the check's directory. The directory holds only regular files
//     the checker wrote, so no symbolic link leads out;
//   - files that are themselves configuration are read from the rendering
//     and checked with the same rules: crt-list files (certificates and
//     ssl options), SPOE configurations ("filter spoe ... config", parsed
//     by haproxy as haproxy.cfg is) and lf-file payloads (log-format, whose
//     converters may load maps); one level deep: such a file naming more
//     configuration is refused (unsupported-nested-config). Each is read
//     as haproxy's own reader reads it (policy_files.go): a crt-list in
//     65,535-byte reads, an lf-file whole; a NUL byte in any of these files
//     or in haproxy.cfg (no-nul), and a crt-list line longer than haproxy's
//     read (line-too-long), are refused, so that a file the policy accepts
//     reads the same under every one of haproxy's readers.
//
// Lines are cut into words as haproxy 2.6 does (parse_line: quotes,
// backslash and \xNN escapes, comments, joined parts; a "\x00" ends a word
// as it does in C; 3.0 cuts alike but after an unset variable, inside an
// expansion the policy refuses anyway), keywords are matched lowercased (haproxy's are
// case-sensitive, so this is only stricter), every line is checked whatever
// its ".if" condition, and the "no"/"default" prefixes are looked through.
// Addresses (bind, stats socket, log targets), pidfile and chroot are not
// files haproxy -c opens: it stops before binding, logging or starting.
// A rendering outside the policy is refused with [PolicyDenial]: one line
// per [Violation] naming the line of haproxy.cfg, the keyword and the rule.
package haproxy
