package haproxy

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// A probe is a minimal configuration using one file-taking entry of the
// policy's table (policy_keywords.go). The same text serves two tests:
// with an outside path the policy must refuse it on the marked line, and
// the real haproxy must try to read that path (so the entry is real).

type probeKind int

const (
	// probeMissing: the path does not exist; haproxy's output names it.
	probeMissing probeKind = iota
	// probeDir: the path is a directory holding a file that is not PEM;
	// haproxy's output names that file (it listed and read the directory).
	probeDir
	// probeFIFO: haproxy prints nothing about the path; it is a FIFO, and
	// the test sees haproxy open it for reading.
	probeFIFO
)

type policyProbe struct {
	// entry is the id of the fileEntry probed ("" for namespace).
	entry string
	// name tells several probes of one entry apart.
	name string
	// config is haproxy.cfg: {{P}} is the path, {{GLOBAL}} extra lines of
	// the global section; the line the policy must name ends in "# probe".
	config string
	// files and certs are rendered into general/ and ssl/ ({{P}} and
	// {{CERT}}, a certificate with its key, replaced).
	files, certs map[string]string
	kind         probeKind
	// mention is what haproxy prints when it tried the path; default {{P}}.
	mention string
	// rule is the rule broken by an outside path; default file-inside.
	rule string
	// keyword is the Violation's Keyword; default the entry's name.
	keyword string
	// inside is a path the policy accepts there; default general/probe.
	inside string
	// viaBase names the base directive prefixing the path: "<base> /etc"
	// with the relative path "probe" must be refused too.
	viaBase string
	// since is the first branch whose haproxy accepts the probe's
	// configuration, when later than its entry's.
	since string
}

// appliesTo reports whether haproxy of branch understands the probe: its
// entry and its own configuration exist there.
func (p policyProbe) appliesTo(branch string) bool {
	if e := entryByID(p.entry); e != nil && !branchAtLeast(branch, e.since) {
		return false
	}
	return branchAtLeast(branch, p.since)
}

func (p policyProbe) label() string {
	if p.name == "" {
		return p.entry
	}
	// No parentheses: the label names the test's temporary directory,
	// and an unquoted ')' would end a converter's argument.
	return strings.TrimSpace(p.entry + " " + p.name)
}

// render builds the probe's rendering.
func (p policyProbe) render(path, global, cert string) render.Output {
	r := strings.NewReplacer("{{P}}", path, "{{GLOBAL}}", global, "{{CERT}}", cert)
	expand := func(in map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range in {
			out[k] = r.Replace(v)
		}
		return out
	}
	return render.Output{HAProxyConfig: r.Replace(p.config), Files: expand(p.files), Certs: expand(p.certs)}
}

// markedLine is the 1-based line of config ending in "# probe".
func markedLine(t testing.TB, config string) int {
	t.Helper()
	for i, line := range strings.Split(config, "\n") {
		if strings.HasSuffix(line, "# probe") {
			return i + 1
		}
	}
	t.Fatalf("no line ends in # probe:\n%s", config)
	return 0
}

const (
	probeGlobal   = "global\n{{GLOBAL}}"
	probeDefaults = "defaults\n  mode http\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\n"
	probeFrontend = probeGlobal + probeDefaults + "frontend f\n  bind :18080\n"
	probeBackend  = probeGlobal + probeDefaults + "backend b\n"
)

var siteCert = map[string]string{"site.pem": "{{CERT}}"}

func policyProbes() []policyProbe {
	probes := []policyProbe{
		{entry: "ca-base", config: probeGlobal + "  ca-base {{P}} # probe\n" + probeDefaults + "frontend f\n  bind :18080 ca-file x.pem\n", mention: "{{P}}/x.pem", inside: "ssl"},
		{entry: "crt-base", config: probeGlobal + "  crt-base {{P}} # probe\n" + probeDefaults + "frontend f\n  bind :18080 ssl crt x.pem\n", mention: "{{P}}/x.pem", inside: "ssl"},
		{entry: "51degrees-data-file", config: probeGlobal + "  51degrees-data-file {{P}} # probe\n"},
		{entry: "deviceatlas-json-file", config: probeGlobal + "  deviceatlas-json-file {{P}} # probe\n"},
		{entry: "wurfl-data-file", config: probeGlobal + "  wurfl-data-file {{P}} # probe\n"},
		{entry: "wurfl-patch-file", config: probeGlobal + "  wurfl-patch-file {{P}} # probe\n"},
		{entry: "h1-case-adjust-file", config: probeGlobal + "  h1-case-adjust-file {{P}} # probe\n" + probeDefaults + "frontend f\n  bind :18080\n  option h1-case-adjust-bogus-client\n"},
		{entry: "httpclient.ssl.ca-file", config: probeGlobal + "  httpclient.ssl.ca-file {{P}} # probe\n"},
		{entry: "issuers-chain-path", config: probeGlobal + "  issuers-chain-path {{P}} # probe\n", kind: probeDir, inside: "ssl"},
		{entry: "lua-load", config: probeGlobal + "  lua-load {{P}} # probe\n"},
		{entry: "lua-load-per-thread", config: probeGlobal + "  lua-load-per-thread {{P}} # probe\n"},
		{entry: "lua-prepend-path", config: probeGlobal + "  lua-prepend-path {{P}} # probe\n"},
		{entry: "lua-prepend-path", name: "list", config: probeGlobal + "  lua-prepend-path general/?.lua;{{P}} cpath # probe\n"},
		{entry: "ssl-dh-param-file", config: probeGlobal + "  ssl-dh-param-file {{P}} # probe\n"},
		{entry: "server-state-base", config: probeGlobal + "  server-state-base {{P}} # probe\n" + probeDefaults + "backend b\n  load-server-state-from-file local\n  server-state-file-name x.state\n  server s 127.0.0.1:80\n", mention: "{{P}}/x.state", inside: "general"},
		{entry: "server-state-file", config: probeGlobal + "  server-state-file {{P}} # probe\n" + probeDefaults + "backend b\n  load-server-state-from-file global\n  server s 127.0.0.1:80\n", viaBase: "server-state-base"},
		{entry: "backing-file", config: probeGlobal + "ring r\n  size 32764\n  backing-file {{P}} # probe\n"},
		{entry: "errorfile", config: probeFrontend + "  errorfile 503 {{P}} # probe\n"},
		{entry: "errorfile", name: "http-errors", config: probeGlobal + "http-errors e\n  errorfile 503 {{P}} # probe\n"},
		{entry: "server-state-file-name", config: probeBackend + "  load-server-state-from-file local\n  server-state-file-name {{P}} # probe\n  server s 127.0.0.1:80\n", viaBase: "server-state-base"},
		{entry: "filter spoe config", config: probeFrontend + "  filter spoe engine x config {{P}} # probe\nbackend b\n  mode tcp\n  server s 127.0.0.1:1\n"},
		{entry: "reply errorfile", config: probeFrontend + "  http-request return status 503 errorfile {{P}} # probe\n"},
		{entry: "reply file", name: "http-request return", config: probeFrontend + "  http-request return status 200 content-type text/plain file {{P}} # probe\n"},
		{entry: "reply file", name: "http-request deny", config: probeFrontend + "  http-request deny status 403 content-type text/plain file {{P}} # probe\n"},
		{entry: "reply file", name: "http-response return", config: probeFrontend + "  http-response return status 200 content-type text/plain file {{P}} # probe\n"},
		{entry: "reply lf-file", name: "http-request tarpit", config: probeFrontend + "  http-request tarpit status 403 content-type text/plain lf-file {{P}} # probe\n"},
		{entry: "reply lf-file", name: "http-error", config: probeFrontend + "  http-error status 503 content-type text/plain lf-file {{P}} # probe\n"},
		{entry: "acl -f", name: "acl", config: probeFrontend + "  acl a src -f {{P}} # probe\n"},
		{entry: "acl -f", name: "anonymous ACL", config: probeFrontend + "  http-request deny if { src -f {{P}} } # probe\n"},
		{entry: "acl -f", name: "unless -M", config: probeFrontend + "  http-request deny unless { src -M -f {{P}} } # probe\n"},
		{entry: "acl -f", name: "in a SPOE configuration", keyword: "-f",
			config: probeFrontend + "  filter spoe engine x config general/spoe.conf # probe\nbackend b\n  mode tcp\n  server s 127.0.0.1:1\n",
			files:  map[string]string{"spoe.conf": "[x]\nspoe-agent a\n  messages m\n  use-backend b\nspoe-message m\n  acl bad src -f {{P}}\n  args ip=src\n  event on-client-session if bad\n"}},
		{entry: "ca-file", name: "bind", config: probeFrontend + "  bind :18081 ca-file {{P}} # probe\n", viaBase: "ca-base"},
		{entry: "ca-file", name: "server", config: probeBackend + "  server s 127.0.0.1:80 ca-file {{P}} # probe\n", viaBase: "ca-base"},
		{entry: "ca-verify-file", config: probeFrontend + "  bind :18081 ca-verify-file {{P}} # probe\n", viaBase: "ca-base"},
		{entry: "ca-sign-file", config: probeFrontend + "  bind :18081 ssl crt ssl/site.pem generate-certificates ca-sign-file {{P}} # probe\n", certs: siteCert, viaBase: "ca-base"},
		{entry: "crl-file", name: "bind", config: probeFrontend + "  bind :18081 crl-file {{P}} # probe\n", viaBase: "ca-base"},
		{entry: "crl-file", name: "server", config: probeBackend + "  server s 127.0.0.1:80 crl-file {{P}} # probe\n", viaBase: "ca-base"},
		{entry: "crt", name: "bind", config: probeFrontend + "  bind :18081 ssl crt {{P}} # probe\n", viaBase: "crt-base"},
		{entry: "crt", name: "server", config: probeBackend + "  server s 127.0.0.1:80 ssl verify none crt {{P}} # probe\n", viaBase: "crt-base"},
		{entry: "crt", name: "default-server", config: probeBackend + "  default-server ssl verify none crt {{P}} # probe\n  server s 127.0.0.1:80\n", viaBase: "crt-base"},
		{entry: "crt", name: "server-template", config: probeBackend + "  server-template s 2 127.0.0.1:80 ssl verify none crt {{P}} # probe\n", viaBase: "crt-base"},
		{entry: "crt", name: "stats socket", config: probeGlobal + "  stats socket /nonexistent/gatehouse.sock ssl crt {{P}} # probe\n", viaBase: "crt-base"},
		{entry: "crt", name: "peers bind", config: probeGlobal + "  localpeer local\n" + probeDefaults + "peers p\n  bind 127.0.0.1:10000 ssl crt {{P}} # probe\n  server local\n", viaBase: "crt-base"},
		{entry: "crt", name: "ring server", config: probeGlobal + "ring r\n  server s 127.0.0.1:6514 ssl verify none crt {{P}} # probe\n", viaBase: "crt-base"},
		{entry: "crt", name: "log-forward bind", config: probeGlobal + "log-forward lf\n  bind :18082 ssl crt {{P}} # probe\n", viaBase: "crt-base"},
		{entry: "crt-list", config: probeFrontend + "  bind :18081 ssl crt-list {{P}} # probe\n"},
		{entry: "tls-ticket-keys", config: probeFrontend + "  bind :18081 ssl crt ssl/site.pem tls-ticket-keys {{P}} # probe\n", certs: siteCert},
		{entry: "crt-list certificate", config: probeFrontend + "  bind :18081 ssl crt-list ssl/probe.list # probe\n", certs: map[string]string{"probe.list": "{{P}}\n"}, viaBase: "crt-base", keyword: "crt-list"},
		{entry: "crt-list ca-file", config: probeFrontend + "  bind :18081 ssl crt-list ssl/probe.list # probe\n", certs: map[string]string{"site.pem": "{{CERT}}", "probe.list": "ssl/site.pem [ca-file {{P}} verify optional] example.test\n"}, viaBase: "ca-base", keyword: "crt-list"},
		{entry: "crt-list ca-verify-file", config: probeFrontend + "  bind :18081 ssl crt-list ssl/probe.list # probe\n", certs: map[string]string{"site.pem": "{{CERT}}", "probe.list": "ssl/site.pem [ca-verify-file {{P}}]\n"}, viaBase: "ca-base", keyword: "crt-list"},
		{entry: "crt-list crl-file", config: probeFrontend + "  bind :18081 ssl crt-list ssl/probe.list # probe\n", certs: map[string]string{"site.pem": "{{CERT}}", "probe.list": "ssl/site.pem [crl-file {{P}}]\n"}, viaBase: "ca-base", keyword: "crt-list"},
		{entry: "set-map", config: probeFrontend + "  http-request set-map({{P}}) %[src] %[src] # probe\n"},
		{entry: "del-map", config: probeFrontend + "  http-response del-map({{P}}) %[src] # probe\n"},
		{entry: "add-acl", config: probeFrontend + "  http-request add-acl({{P}}) %[src] # probe\n"},
		{entry: "del-acl", config: probeFrontend + "  http-response del-acl({{P}}) %[src] # probe\n"},
		{entry: "jwt_verify", kind: probeFIFO, config: probeFrontend + "  http-request set-var(txn.x) req.hdr(a),jwt_verify(HS256,{{P}}) # probe\n"},
		{entry: "map_dom", name: "dynamic use_backend", config: probeFrontend + "  use_backend %[req.hdr(host),lower,map_dom({{P}},b)] # probe\nbackend b\n"},
		{entry: "map", name: "in an lf-file", config: probeFrontend + "  http-request return status 200 content-type text/plain lf-file general/probe.lf # probe\n",
			files: map[string]string{"probe.lf": "hello %[src,map({{P}},none)]\n"}},
		{entry: "map_ip", name: "server sni", config: probeBackend + "  server s 127.0.0.1:80 ssl verify none sni str(a),map_ip({{P}}) # probe\n"},
		{entry: "map_str", name: "anonymous ACL", config: probeFrontend + "  http-request deny if { req.hdr(host),map_str({{P}}) -m found } # probe\n"},
		// haproxy 3.0's entries.
		{entry: "stats-file", kind: probeFIFO, config: probeGlobal + "  stats-file {{P}} # probe\n"},
		{entry: "key-base", name: "global", config: probeGlobal + "  key-base {{P}} # probe\n" + probeDefaults + "crt-store\n  load crt ssl/site.pem key x.key\n", certs: siteCert, mention: "{{P}}/x.key", inside: "ssl"},
		{entry: "key-base", name: "crt-store", config: probeGlobal + probeDefaults + "crt-store\n  key-base {{P}} # probe\n  load crt ssl/site.pem key x.key\n", certs: siteCert, mention: "{{P}}/x.key", inside: "ssl"},
		{entry: "crt", name: "crt-store load", since: "3.0", config: probeGlobal + probeDefaults + "crt-store\n  load crt {{P}} # probe\n", viaBase: "crt-base"},
		{entry: "load key", config: probeGlobal + probeDefaults + "crt-store\n  load crt ssl/site.pem key {{P}} # probe\n", certs: siteCert, viaBase: "key-base"},
		{entry: "load ocsp", config: probeGlobal + probeDefaults + "crt-store\n  load crt ssl/site.pem ocsp {{P}} # probe\n", certs: siteCert, viaBase: "crt-base"},
		{entry: "load issuer", config: probeGlobal + probeDefaults + "crt-store\n  load crt ssl/site.pem issuer {{P}} # probe\n", certs: siteCert, viaBase: "crt-base"},
		{entry: "load sctl", config: probeGlobal + probeDefaults + "crt-store\n  load crt ssl/site.pem sctl {{P}} # probe\n", certs: siteCert, viaBase: "crt-base"},
		{entry: "default-crt", config: probeFrontend + "  bind :18081 ssl default-crt {{P}} # probe\n", viaBase: "crt-base"},
		{entry: "crt-list key", config: probeFrontend + "  bind :18081 ssl crt-list ssl/probe.list # probe\n", certs: map[string]string{"site.pem": "{{CERT}}", "probe.list": "ssl/site.pem [key {{P}}]\n"}, keyword: "crt-list"},
		{entry: "crt-list ocsp", config: probeFrontend + "  bind :18081 ssl crt-list ssl/probe.list # probe\n", certs: map[string]string{"site.pem": "{{CERT}}", "probe.list": "ssl/site.pem [ocsp {{P}}]\n"}, keyword: "crt-list"},
		{entry: "crt-list issuer", config: probeFrontend + "  bind :18081 ssl crt-list ssl/probe.list # probe\n", certs: map[string]string{"site.pem": "{{CERT}}", "probe.list": "ssl/site.pem [issuer {{P}}]\n"}, keyword: "crt-list"},
		{entry: "crt-list sctl", config: probeFrontend + "  bind :18081 ssl crt-list ssl/probe.list # probe\n", certs: map[string]string{"site.pem": "{{CERT}}", "probe.list": "ssl/site.pem [sctl {{P}}]\n"}, keyword: "crt-list"},
		{entry: "crt-list crt", config: probeFrontend + "  bind :18081 ssl crt-list ssl/probe.list # probe\n", certs: map[string]string{"site.pem": "{{CERT}}", "probe.list": "ssl/site.pem [crt {{P}}]\n"}, keyword: "crt-list", viaBase: "crt-base"},
		// 3.0 reads a pattern file's name after "file@" or "opt@" (2.6
		// reads the whole name as a relative path).
		{entry: "acl -f", name: "file@", since: "3.0", config: probeFrontend + "  acl a src -f file@{{P}} # probe\n"},
		{entry: "acl -f", name: "opt@", since: "3.0", kind: probeFIFO, config: probeFrontend + "  acl a src -f opt@{{P}} # probe\n"},
		{entry: "map", name: "file@", since: "3.0", config: probeFrontend + "  http-request set-var(txn.x) str(1),map(file@{{P}}) # probe\n"},
		{entry: "map_str", name: "opt@", since: "3.0", kind: probeFIFO, config: probeFrontend + "  http-request set-var(txn.x) str(1),map_str(opt@{{P}}) # probe\n"},
		{entry: "map_dom", name: "file@ in a dynamic use_backend", since: "3.0", config: probeFrontend + "  use_backend %[req.hdr(host),lower,map_dom(file@{{P}},b)] # probe\nbackend b\n"},
		// A namespace is a file name under /var/run/netns: haproxy says
		// it could not open it (which path that reaches depends on
		// /var/run/netns existing, so the output is the evidence).
		{name: "bind namespace", config: probeFrontend + "  bind :18081 namespace {{P}} # probe\n", mention: "Cannot open namespace '{{P}}'", rule: RuleNamespaceName, keyword: "namespace", inside: "blue"},
		{name: "server namespace", config: probeBackend + "  server s 127.0.0.1:80 namespace {{P}} # probe\n", mention: "Cannot open namespace '{{P}}'", rule: RuleNamespaceName, keyword: "namespace", inside: "blue"},
	}
	for _, name := range slices.Concat(mapConverters, mapKeyConverters) {
		probes = append(probes, policyProbe{entry: name, config: probeFrontend + "  http-request set-var(txn.x) str(1)," + name + "({{P}}) # probe\n"})
	}
	return probes
}

func entryByID(id string) *fileEntry {
	for i := range fileEntries {
		if fileEntries[i].id == id {
			return &fileEntries[i]
		}
	}
	return nil
}

// TestPolicyProbesCoverTheTable: every entry of the table has a probe.
func TestPolicyProbesCoverTheTable(t *testing.T) {
	probed := map[string]bool{}
	for _, p := range policyProbes() {
		if p.entry != "" && entryByID(p.entry) == nil {
			t.Errorf("probe %s: no table entry %q", p.label(), p.entry)
		}
		probed[p.entry] = true
	}
	for _, e := range fileEntries {
		if !probed[e.id] {
			t.Errorf("table entry %q (%s) has no probe", e.id, e.doc)
		}
		if e.doc == "" {
			t.Errorf("table entry %q cites no section of the manual", e.id)
		}
	}
}

// expectedKeyword is the Keyword a probe's violation carries.
func (p policyProbe) expectedKeyword() string {
	if p.keyword != "" {
		return p.keyword
	}
	return entryByID(p.entry).name
}

// hasViolation reports whether vs holds a violation of rule on line with
// keyword.
func hasViolation(vs []Violation, line int, rule, keyword string) bool {
	for _, v := range vs {
		if v.Line == line && v.Rule == rule && v.Keyword == keyword {
			return true
		}
	}
	return false
}

// TestPolicyFileArguments runs every probe through the policy: outside
// paths (absolute, "..", through a base directive set to /etc, relative to
// "default-path origin /") are refused on the right line with the right
// rule; the inside path passes.
func TestPolicyFileArguments(t *testing.T) {
	lua := Policy{AllowLua: true}
	for _, p := range policyProbes() {
		t.Run(p.label(), func(t *testing.T) {
			rule := p.rule
			if rule == "" {
				rule = RuleFileInside
			}
			inside := p.inside
			if inside == "" {
				inside = "general/probe"
			}
			line := markedLine(t, p.render("x", "", "c").HAProxyConfig)
			outside := []string{"/etc/passwd", "../outside/probe", "general/../../probe", "/proc/self/environ", "~root/x"}
			if rule == RuleNamespaceName {
				outside = []string{"/etc/passwd", "../x", "a/b", ".."}
			}
			for _, path := range outside {
				vs := lua.Check(p.render(path, "", "c"))
				if !hasViolation(vs, line, rule, p.expectedKeyword()) {
					t.Errorf("path %q: no %s violation of %s on line %d; got %v", path, rule, p.expectedKeyword(), line, vs)
				}
			}
			if vs := lua.Check(p.render(inside, "", "c")); len(vs) != 0 {
				t.Errorf("inside path %q refused: %v", inside, vs)
			}
			if p.viaBase != "" {
				// The base line comes before the marked one.
				out := p.render("probe", "  "+p.viaBase+" /etc\n", "c")
				vs := lua.Check(out)
				if !hasViolation(vs, line+1, RuleFileInside, p.expectedKeyword()) {
					t.Errorf("%s /etc: no violation on line %d; got %v", p.viaBase, line+1, vs)
				}
				if !hasViolation(vs, 2, RuleFileInside, p.viaBase) {
					t.Errorf("%s /etc itself not refused on line 2; got %v", p.viaBase, vs)
				}
				for _, v := range vs {
					if v.Line == line+1 && !strings.Contains(v.Message, "through "+p.viaBase+" (line 2)") {
						t.Errorf("message does not say the base resolves it: %s", v)
					}
				}
				// And an inside base keeps it inside.
				if vs := lua.Check(p.render("probe", "  "+p.viaBase+" ssl\n", "c")); len(vs) != 0 {
					t.Errorf("%s ssl: refused: %v", p.viaBase, vs)
				}
			}
			// default-path origin / makes the inside path /general/probe.
			vs := lua.Check(p.render(inside, "  default-path origin /\n", "c"))
			if !hasViolation(vs, 2, RuleDefaultPath, "default-path") {
				t.Errorf("default-path origin /: not refused on line 2; got %v", vs)
			}
			if e := entryByID(p.entry); e != nil && e.lua {
				vs := Policy{}.Check(p.render(inside, "", "c"))
				if !hasViolation(vs, line, RuleNoLua, e.name) {
					t.Errorf("Lua not allowed, yet no %s violation on line %d: %v", RuleNoLua, line, vs)
				}
			}
		})
	}
}

// TestPolicyFileTableAgainstHAProxy proves the table is real: for every
// probe (entries marked unprovable excepted, with their reason logged) the
// installed haproxy, run as the checker runs it, tries to read the path
// the policy refuses.
func TestPolicyFileTableAgainstHAProxy(t *testing.T) {
	for _, h := range testedHAProxies(t) {
		t.Run(h.branch, func(t *testing.T) { probeTableAgainst(t, h) })
	}
}

// probeTableAgainst runs every probe of an entry of h's branch against h.
func probeTableAgainst(t *testing.T, h testedHAProxy) {
	cert := selfSigned(t)
	for _, p := range policyProbes() {
		e := entryByID(p.entry)
		if !p.appliesTo(h.branch) {
			continue
		}
		if why := e.unprovableOn(h.branch); e != nil && why != "" && why != unprovableAction {
			t.Logf("%s: left out: %s", p.label(), why)
			continue
		}
		// The actions are the other way round: the test shows
		// haproxy -c does not open their file.
		notOpened := e != nil && e.unprovableOn(h.branch) == unprovableAction
		if notOpened {
			p.kind = probeFIFO
		}
		t.Run(p.label(), func(t *testing.T) {
			dir := t.TempDir()
			if strings.ContainsAny(dir, "(),#'\"\\ ") {
				t.Fatalf("temporary directory %q has characters a configuration would need to quote", dir)
			}
			var path string
			switch p.kind {
			case probeMissing:
				path = filepath.Join(dir, "missing", "probe")
			case probeDir:
				path = filepath.Join(dir, "issuers")
				if err := os.Mkdir(path, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(path, "a.pem"), []byte("not a certificate\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			case probeFIFO:
				path = filepath.Join(dir, "probe.fifo")
				if err := syscall.Mkfifo(path, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			out := p.render(path, "", cert)
			line := markedLine(t, out.HAProxyConfig)
			rule := p.rule
			if rule == "" {
				rule = RuleFileInside
			}
			if vs := (Policy{AllowLua: true}).Check(out); !hasViolation(vs, line, rule, p.expectedKeyword()) {
				t.Errorf("the policy does not refuse the probe on line %d: %v", line, vs)
			}

			run := filepath.Join(dir, "run")
			if err := os.Mkdir(run, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := writeTree(run, out); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// -V: from 3.0 on, a valid configuration is said so only
			// when verbose.
			cmd := h.command(t, ctx, "-c", "-V", "-f", ConfigFile)
			cmd.Dir = run
			var output bytes.Buffer
			cmd.Stdout, cmd.Stderr = &output, &output

			if p.kind == probeFIFO {
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				done := make(chan struct{})
				go func() {
					_ = cmd.Wait()
					close(done)
				}()
				opened := waitForReader(ctx, path, done)
				<-done
				switch {
				case notOpened && opened:
					t.Errorf("haproxy -c opened %s: the entry's reason %q is wrong; output:\n%s", path, e.unprovableOn(h.branch), output.String())
				case notOpened && !strings.Contains(output.String(), "Configuration file is valid"):
					t.Errorf("haproxy -c did not accept the probe, so it proves nothing; output:\n%s", output.String())
				case !notOpened && !opened:
					t.Errorf("haproxy -c never opened %s for reading; output:\n%s", path, output.String())
				}
				return
			}
			_ = cmd.Run() // haproxy fails on the missing file: its output tells
			if ctx.Err() != nil {
				t.Fatalf("haproxy -c did not finish: %v", ctx.Err())
			}
			mention := p.mention
			switch {
			case p.kind == probeDir:
				mention = filepath.Join(path, "a.pem")
			case mention == "":
				mention = path
			default:
				mention = strings.ReplaceAll(mention, "{{P}}", path)
			}
			if !strings.Contains(output.String(), mention) {
				t.Errorf("haproxy -c did not report %q, so it may not read it; output:\n%s", mention, output.String())
			}
		})
	}
}

// waitForReader reports whether a process opens the FIFO at path for
// reading before done is closed (the process ended): opening a FIFO for
// writing without blocking succeeds only while it has a reader. It then
// closes its end, so the reader sees end of file and goes on.
func waitForReader(ctx context.Context, path string, done <-chan struct{}) bool {
	for {
		f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			f.Close()
			return true
		}
		if !errors.Is(err, syscall.ENXIO) {
			return false
		}
		select {
		case <-done:
			return false
		case <-ctx.Done():
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
}
