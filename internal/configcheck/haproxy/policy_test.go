package haproxy

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

func TestPolicySplitConfigLine(t *testing.T) {
	tests := []struct {
		line      string
		words     []string
		env       bool
		malformed bool
	}{
		{line: "  lua-load general/x.lua", words: []string{"lua-load", "general/x.lua"}},
		{line: "\t \tlua-load\tx", words: []string{"lua-load", "x"}},
		{line: `"lua-load" x`, words: []string{"lua-load", "x"}},
		{line: `'lua-load' x`, words: []string{"lua-load", "x"}},
		{line: `lu"a-l"'oa'd x`, words: []string{"lua-load", "x"}},
		{line: `\x6cua-load x`, words: []string{"lua-load", "x"}},
		{line: `"\x6cua-load" x`, words: []string{"lua-load", "x"}},
		{line: `'\x6cua-load' x`, words: []string{`\x6cua-load`, "x"}},
		// haproxy keeps the backslash before a character with no escape.
		{line: `lua\-load x`, words: []string{`lua\-load`, "x"}},
		{line: `a\ b c`, words: []string{"a b", "c"}},
		{line: `a\\b`, words: []string{`a\b`}},
		{line: `a#b c`, words: []string{"a"}},
		{line: `a\#b c`, words: []string{"a#b", "c"}},
		{line: `"a#b" c`, words: []string{"a#b", "c"}},
		{line: `'a"b' "c'd"`, words: []string{`a"b`, `c'd`}},
		{line: `\"a\'`, words: []string{`"a'`}},
		{line: `\$HOME "\$HOME" '$HOME' $HOME`, words: []string{`\$HOME`, "$HOME", "$HOME", "$HOME"}},
		{line: `a "" b`, words: []string{"a", "", "b"}},
		{line: `"" lua-load x`, words: []string{"", "lua-load", "x"}},
		{line: "a\vb\fc", words: []string{"a", "b", "c"}},
		{line: "a\rb", words: []string{"a"}},
		{line: "a \rb", words: []string{"a", "b"}},
		{line: "a\x00 b", words: []string{"a"}},
		{line: `a\x00b c`, words: []string{"a", "c"}},
		{line: `"/x\x00/../y" z`, words: []string{"/x", "z"}},
		{line: `a \n`, words: []string{"a", "\n"}},
		{line: "a   ", words: []string{"a"}},
		{line: `a\`, words: []string{`a\`}},
		{line: `"${X}/etc/passwd"`, words: []string{"/etc/passwd"}, env: true},
		{line: `"$X/etc/passwd"`, words: []string{"/etc/passwd"}, env: true},
		{line: `"${X-/etc}/passwd"`, words: []string{"/etc/passwd"}, env: true},
		{line: `a "${X[*]}" b`, words: []string{"a", "", "b"}, env: true},
		{line: `"${.LINE}"`, env: true},
		{line: `"$1"`, env: true, malformed: true},
		{line: `"${X"`, env: true, malformed: true},
		{line: `"unterminated`, words: []string{"unterminated"}, malformed: true},
		{line: `a\xZZ b`, words: []string{"a"}, malformed: true},
		{line: `a\x4`, words: []string{"a"}, malformed: true},
	}
	for _, tt := range tests {
		got := splitConfigLine(tt.line)
		if !slices.Equal(got.words, tt.words) || got.envExpanded != tt.env || got.malformed != tt.malformed {
			t.Errorf("splitConfigLine(%q) = %q env=%v malformed=%v, want %q env=%v malformed=%v",
				tt.line, got.words, got.envExpanded, got.malformed, tt.words, tt.env, tt.malformed)
		}
	}
}

// TestPolicySplitMatchesHAProxy compares the policy's tokenizer with
// haproxy's own: each case is the file argument of a lua-load line (so the
// keyword must be recognized, and haproxy's error quotes the file name it
// parsed), or a line whose first word haproxy quotes as an unknown keyword.
func TestPolicySplitMatchesHAProxy(t *testing.T) {
	binary, err := findBinary("")
	if err != nil {
		t.Fatalf("%v (configcheck's tests run the real haproxy)", err)
	}
	args := []string{
		`"/nope/a b"`, `'/nope/a"b'`, `/nope/a\ b`, `/nope/\x61\x62`, `"/nope/${UNSET-dflt}"`,
		`"/nope/$UNSET"x`, `/nope/a#b`, `/nope/a\#b`, `"/nope/a#b"`, `/nope/\$x`, `"/nope/\$x"`,
		`/nope/a"b c"'d e'`, `/nope/\q`, `'/nope/\x41'`, `"/nope/\x41"`, `/nope/a\\b`,
		`/nope/a\x00b`, `"/nope/${UNSET[*]}z"`, `/nope/'it'\''s'`, `/nope/t\tab`,
	}
	keywords := []string{`\x6cua-load`, `"lua"-'load'`, `lua\-load`, `\lua-load`, `LUA-LOAD`, `lua-load\x00x`, `lu\a-load`}
	var config strings.Builder
	config.WriteString("global\n")
	for _, a := range args {
		config.WriteString("  lua-load " + a + "\n")
	}
	for i, k := range keywords {
		fmt.Fprintf(&config, "  %s /nope/keyword%d\n", k, i)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ConfigFile), []byte(config.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "-c", "-f", ConfigFile)
	cmd.Dir = dir
	cmd.Env = []string{} // no variable set, as the policy assumes
	output, _ := cmd.CombinedOutput()

	luaFile := regexp.MustCompile(`\[haproxy\.cfg:(\d+)\] : error in Lua file '(.*?)': cannot open `)
	unknown := regexp.MustCompile(`\[haproxy\.cfg:(\d+)\] : unknown keyword '(.*?)' in `)
	parsed := map[int][2]string{} // line -> (kind, value)
	for _, m := range luaFile.FindAllStringSubmatch(string(output), -1) {
		n, _ := strconv.Atoi(m[1])
		parsed[n] = [2]string{"lua-load", m[2]}
	}
	for _, m := range unknown.FindAllStringSubmatch(string(output), -1) {
		n, _ := strconv.Atoi(m[1])
		parsed[n] = [2]string{"unknown", m[2]}
	}
	for i, line := range strings.Split(strings.TrimSuffix(config.String(), "\n"), "\n") {
		if i == 0 {
			continue
		}
		got, ok := parsed[i+1]
		if !ok {
			t.Errorf("line %d %q: haproxy said nothing recognizable; output:\n%s", i+1, line, output)
			continue
		}
		words := splitConfigLine(line).words
		switch got[0] {
		case "lua-load":
			if len(words) < 2 || words[0] != "lua-load" || words[1] != got[1] {
				t.Errorf("line %q: haproxy loads Lua file %q, the policy reads words %q", line, got[1], words)
			}
		case "unknown":
			if len(words) == 0 || words[0] != got[1] {
				t.Errorf("line %q: haproxy reads keyword %q, the policy %q", line, got[1], words)
			}
		}
	}
}

// violationsOf returns the "line:rule:keyword" of each violation.
func violationsOf(vs []Violation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, fmt.Sprintf("%d:%s:%s", v.Line, v.Rule, v.Keyword))
	}
	return out
}

func TestPolicyRefusals(t *testing.T) {
	tests := []struct {
		name     string
		config   string
		allowLua bool
		want     []string // line:rule:keyword, in order
	}{
		{name: "lua-load", config: "global\n  lua-load general/x.lua\n", want: []string{"2:no-lua:lua-load"}},
		{name: "lua-load-per-thread", config: "global\n  lua-load-per-thread general/x.lua\n", want: []string{"2:no-lua:lua-load-per-thread"}},
		{name: "lua-prepend-path", config: "global\n  lua-prepend-path general/?.lua\n", want: []string{"2:no-lua:lua-prepend-path"}},
		{name: "lua allowed", config: "global\n  lua-load general/x.lua\n  lua-prepend-path general/?.lua cpath\n  lua-load-per-thread general/y.lua\n", allowLua: true},
		{name: "lua allowed, outside", config: "global\n  lua-load /tmp/x.lua\n", allowLua: true, want: []string{"2:file-inside:lua-load"}},
		{name: "lua allowed, outside via ..", config: "global\n  lua-load-per-thread general/../../x.lua\n", allowLua: true, want: []string{"2:file-inside:lua-load-per-thread"}},
		{name: "lua allowed, search path outside", config: "global\n  lua-prepend-path general/?.lua;/usr/lib/?.so cpath\n", allowLua: true, want: []string{"2:file-inside:lua-prepend-path"}},
		{name: "quoted", config: "global\n  \"lua-load\" general/x.lua\n", want: []string{"2:no-lua:lua-load"}},
		{name: "single-quoted parts", config: "global\n  lu'a-lo'ad general/x.lua\n", want: []string{"2:no-lua:lua-load"}},
		{name: "hex escape", config: "global\n  \\x6cua-load general/x.lua\n", want: []string{"2:no-lua:lua-load"}},
		{name: "tabs", config: "global\n\t \tlua-load\tgeneral/x.lua\n", want: []string{"2:no-lua:lua-load"}},
		// haproxy refuses these spellings itself (unknown keyword);
		// the policy refuses them as well.
		{name: "backslash", config: "global\n  lua\\-load general/x.lua\n", want: []string{"2:no-lua:lua-load"}},
		{name: "uppercase", config: "global\n  LUA-LOAD general/x.lua\n", want: []string{"2:no-lua:lua-load"}},
		{name: "in a false .if block", config: "global\n.if 0\n  lua-load general/x.lua\n.endif\n", want: []string{"3:no-lua:lua-load"}},
		{name: "after a NUL escape", config: "global\n  lua-load\\x00junk general/x.lua\n", want: []string{"2:no-lua:lua-load"}},
		{name: "commented out", config: "global\n  # lua-load general/x.lua\n  maxconn 10 # lua-load x\n"},
		{name: "empty first word", config: "\"\" lua-load general/x.lua\n"},
		{name: "external-check global", config: "global\n  external-check\n", want: []string{"2:no-external-command:external-check"}},
		{name: "option external-check", config: "backend b\n  option external-check\n  external-check command /bin/true\n  external-check path /bin\n",
			want: []string{"2:no-external-command:option external-check", "3:no-external-command:external-check", "4:no-external-command:external-check"}},
		{name: "no option external-check", config: "backend b\n  no option external-check\n"},
		{name: "default option external-check", config: "backend b\n  default option external-check\n", want: []string{"2:no-external-command:option external-check"}},
		{name: "program", config: "program p\n  command /bin/sh -c id\n", want: []string{"1:no-external-command:program", "2:no-external-command:command"}},
		{name: "insecure", config: "global\n  insecure-fork-wanted\n  insecure-setuid-wanted\n  no insecure-fork-wanted\n",
			want: []string{"2:no-external-command:insecure-fork-wanted", "3:no-external-command:insecure-setuid-wanted"}},
		{name: "setenv family", config: "global\n  setenv A b\n  presetenv A b\n  resetenv\n  unsetenv A\n",
			want: []string{"2:no-setenv:setenv", "3:no-setenv:presetenv", "4:no-setenv:resetenv", "5:no-setenv:unsetenv"}},
		{name: "engines", config: "global\n  ssl-engine rdrand\n  ssl-provider legacy\n  ssl-provider-path /usr/lib\n",
			want: []string{"2:no-engine:ssl-engine", "3:no-engine:ssl-provider", "4:no-engine:ssl-provider-path"}},
		// haproxy 3.0: capabilities kept at start, developer traces.
		{name: "setcap and trace", config: "global\n  setcap cap_net_bind_service,cap_net_admin\n  trace h1 sink stdout level developer start now\n",
			want: []string{"2:no-privilege:setcap", "3:no-trace:trace"}},
		{name: "opentracing", config: "frontend f\n  filter opentracing config general/ot.cfg\n", want: []string{"2:unsupported-nested-config:filter opentracing"}},
		{name: "default-path", config: "global\n  default-path parent\n  default-path origin /\n  default-path origin ssl\n  default-path config\n  default-path current\n",
			want: []string{"2:default-path:default-path", "3:default-path:default-path", "4:default-path:default-path"}},
		{name: "env expansion", config: "global\n  log \"${SYSLOG}:514\" local0\nfrontend f\n  acl leak src -f \"${X}/etc/passwd\"\n",
			want: []string{"2:no-env-expansion:log", "4:no-env-expansion:acl", "4:file-inside:-f"}},
		{name: "env in .if", config: ".if streq(\"$HOME\",/root)\n.endif\n", want: []string{"1:no-env-expansion:.if"}},
		{name: "pseudo-variable", config: "frontend f\n  http-request set-header X-Line \"${.LINE}\"\n", want: []string{"2:no-env-expansion:http-request"}},
		{name: "dollar escaped or single-quoted", config: "userlist u\n  user a password '$6$salt$hash'\n  user b password \"\\$6\\$x\"\n  user c password $6$x\n"},
		{name: "bases outside", config: "global\n  crt-base /etc/ssl\n  ca-base ../ca\n  server-state-base /var/lib/haproxy\n",
			want: []string{"2:file-inside:crt-base", "3:file-inside:ca-base", "4:file-inside:server-state-base"}},
		{name: "base through its own ..", config: "global\n  crt-base ssl\nfrontend f\n  bind :443 ssl crt ../../etc/x.pem\n", want: []string{"4:file-inside:crt"}},
		{name: "crt-list file takes no crt-base", config: "global\n  crt-base ssl\nfrontend f\n  bind :443 ssl crt-list general/list\n"},
		{name: "system CA store", config: "global\n  httpclient.ssl.ca-file @system-ca\nbackend b\n  server s 10.0.0.1:443 ssl ca-file @system-ca crl-file @system-ca\n"},
		{name: "system CA name under ca-base is a file", config: "global\n  ca-base ssl\nbackend b\n  server s 10.0.0.1:443 ssl ca-file @system-ca\n"},
		{name: "addresses and start-up paths", config: "global\n  log /dev/log local0\n  stats socket /run/haproxy/admin.sock mode 600 level admin\n  pidfile /run/haproxy.pid\n  chroot /var/lib/haproxy\n  unix-bind prefix /run/haproxy mode 770\n  user haproxy\nfrontend f\n  bind unix@/run/f.sock\n  bind /run/g.sock\n  log-stderr global\nfcgi-app php\n  docroot /var/www/html\nresolvers dns\n  parse-resolv-conf\n"},
		{name: "namespace", config: "frontend f\n  bind :80 namespace blue\n  bind :81 namespace ../../etc/shadow\nbackend b\n  server s 10.0.0.1:80 namespace *\n",
			want: []string{"3:namespace-name:namespace"}},
		{name: "ACL -f in fcgi-app", config: "fcgi-app php\n  acl bad path -f /etc/passwd\n", want: []string{"2:file-inside:-f"}},
		{name: "converter as its own word", config: "frontend f\n  acl a src map_ip(/etc/hosts) -m found\n", want: []string{"2:file-inside:map_ip"}},
		{name: "converter quoted at the second level", config: "frontend f\n  http-request set-var(txn.x) 'src,map(\"/etc/x,y\",d)'\n  http-request set-var(txn.y) src,map(\\\"../x\\\")\n",
			want: []string{"2:file-inside:map", "3:file-inside:map"}},
		{name: "converter uppercase", config: "frontend f\n  http-request set-var(txn.x) src,MAP_IP(/etc/hosts)\n", want: []string{"2:file-inside:map_ip"}},
		{name: "not a converter", config: "frontend f\n  http-request set-header X-A bitmap(/etc/x)\n  http-request set-var(txn.x) str(map(/etc/x))\n", want: []string{"3:file-inside:map"}},
		{name: "action name by prefix", config: "frontend f\n  http-request set-mapX/etc/x) %[src] %[src]\n", want: []string{"2:file-inside:set-map"}},
		{name: "jwt_verify variable key", config: "frontend f\n  http-request set-var(txn.ok) req.hdr(a),jwt_verify(txn.alg,txn.key)\n"},
		{name: "no prefix still reads the file", config: "frontend f\n  no errorfile 503 /etc/passwd\n", want: []string{"2:file-inside:errorfile"}},
		{name: "errorfiles names a section", config: "frontend f\n  errorfiles site\n  http-request return status 503 errorfiles site\n"},
		{name: "one violation per line, keyword and rule", config: "frontend f\n  bind :443 ssl crt /a crt /b ca-file /c\n", want: []string{"2:file-inside:crt", "2:file-inside:ca-file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vs := Policy{AllowLua: tt.allowLua}.Check(render.Output{HAProxyConfig: tt.config})
			if got := violationsOf(vs); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q\n%s", got, tt.want, PolicyDenial(vs))
			}
		})
	}
}

func TestPolicyNestedConfigs(t *testing.T) {
	tests := []struct {
		name  string
		out   render.Output
		want  []string
		where string // the message names this nested location
	}{
		{
			name: "crt-list lines",
			out: render.Output{
				HAProxyConfig: "global\n  crt-base ssl\n  ca-base ssl\nfrontend f\n  bind :443 ssl crt-list ssl/sites.list\n",
				Certs: map[string]string{"sites.list": "# comment /etc/x\n\nsite.pem [alpn h2 ca-file ca.pem] a.example\n" +
					"other.pem\n/etc/ssl/private/key.pem [verify none]\n"},
			},
			want: []string{"5:file-inside:crt-list"}, where: "in ssl/sites.list line 5",
		},
		{
			name: "crt-list option through ca-base",
			out: render.Output{
				HAProxyConfig: "global\n  ca-base /etc\nfrontend f\n  bind :443 ssl crt-list general/sites.list\n",
				Files:         map[string]string{"sites.list": "ssl/site.pem [crl-file x.crl]\n"},
			},
			want: []string{"2:file-inside:ca-base", "4:file-inside:crt-list"}, where: "in general/sites.list line 1",
		},
		{
			name: "crt-list ssl options without spaces around brackets",
			out: render.Output{
				HAProxyConfig: "frontend f\n  bind :443 ssl crt-list ssl/l\n",
				Certs:         map[string]string{"l": "ssl/a.pem[ca-file /etc/ca.pem]\n"},
			},
			want: []string{"2:file-inside:crt-list"},
		},
		{
			name: "SPOE configuration",
			out: render.Output{
				HAProxyConfig: "frontend f\n  bind :80\n  filter spoe engine e config general/spoe.conf\n",
				Files: map[string]string{"spoe.conf": "[e]\nspoe-agent a\n  messages m\nspoe-message m\n" +
					"  args host=req.hdr(host),map(maps/hosts.map) leak=src,map(/etc/passwd)\n  event on-frontend-http-request\n"},
				Maps: map[string]string{"hosts.map": "a b\n"},
			},
			want: []string{"3:file-inside:map"}, where: "in general/spoe.conf line 5",
		},
		{
			name: "SPOE configuration expanding a variable",
			out: render.Output{
				HAProxyConfig: "frontend f\n  filter spoe config general/spoe.conf\n",
				Files:         map[string]string{"spoe.conf": "spoe-agent a\n  log \"${LOGHOST}\" local0\n"},
			},
			want: []string{"2:no-env-expansion:log"},
		},
		{
			name: "SPOE configuration naming more configuration",
			out: render.Output{
				HAProxyConfig: "frontend f\n  filter spoe config general/spoe.conf\n",
				Files:         map[string]string{"spoe.conf": "spoe-agent a\n  filter spoe config general/spoe.conf\n"},
			},
			want: []string{"2:unsupported-nested-config:filter"},
		},
		{
			name: "lf-file",
			out: render.Output{
				HAProxyConfig: "frontend f\n  http-request return status 200 content-type text/plain lf-file general/page.lf\n" +
					"  http-request return status 201 content-type text/plain lf-file general/page.lf\n",
				Files: map[string]string{"page.lf": "ok\nyou are %[src,map_ip(/etc/hosts,unknown)]\n"},
			},
			// Checked once, reported on the first reference.
			want: []string{"2:file-inside:map_ip"}, where: "in general/page.lf line 2",
		},
		{
			name: "haproxy.cfg read as a crt-list",
			out:  render.Output{HAProxyConfig: "frontend f\n  bind :443 ssl crt-list haproxy.cfg\n"},
			// Its first words become certificates: inside.
		},
		{
			name: "a referenced file the rendering does not have",
			out:  render.Output{HAProxyConfig: "frontend f\n  bind :443 ssl crt-list ssl/missing.list\n  filter spoe config general/missing.conf\n"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vs := Policy{}.Check(tt.out)
			if got := violationsOf(vs); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q\n%s", got, tt.want, PolicyDenial(vs))
			}
			if tt.where != "" && !strings.Contains(PolicyDenial(vs), tt.where) {
				t.Errorf("the denial does not say %q:\n%s", tt.where, PolicyDenial(vs))
			}
		})
	}
}

// TestPolicyExampleConfig: the rendering style of
// examples/configcheck/config.yaml passes.
func TestPolicyExampleConfig(t *testing.T) {
	out := render.Output{
		HAProxyConfig: `global
  default-path config
defaults
  mode http
  timeout connect 5s
  timeout client 30s
  timeout server 30s
frontend fe_http
  bind :8080
  use_backend %[req.hdr(host),lower,map(maps/hosts.map,be_default)]
backend be_default
  http-request return status 404
backend be_app_api_80
  server s1 10.0.0.10:80
`,
		Maps: map[string]string{"hosts.map": "a.example be_app_api_80\n"},
	}
	if vs := (Policy{}).Check(out); len(vs) != 0 {
		t.Errorf("the example's rendering is refused:\n%s", PolicyDenial(vs))
	}
	// And the checker's own test configuration with every kind of file.
	aux := render.Output{HAProxyConfig: auxConfig, Maps: map[string]string{"hosts.map": "x y\n"}, Files: map[string]string{"503.http": errorFile}, Certs: map[string]string{"site.pem": "x"}}
	if vs := (Policy{}).Check(aux); len(vs) != 0 {
		t.Errorf("auxConfig is refused:\n%s", PolicyDenial(vs))
	}
}

// TestPolicyAttackFromTheIssue: the injected line of the attack review is
// refused, naming its line and rule, quoting it.
func TestPolicyAttackFromTheIssue(t *testing.T) {
	out := render.Output{HAProxyConfig: "frontend f\n  bind :80\n  # note: hello\n  acl leak src -f /etc/passwd\n  http-request deny if leak\n"}
	vs := Policy{}.Check(out)
	if len(vs) != 1 {
		t.Fatalf("got %v", vs)
	}
	want := `haproxy.cfg:4: -f: -f "/etc/passwd" is an absolute path; put the file in spec.maps, spec.files or spec.sslCertificates and refer to it as maps/<name>, general/<name> or ssl/<name>; line: "acl leak src -f /etc/passwd" (rule file-inside)`
	if got := vs[0].String(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestPolicyMessages(t *testing.T) {
	long := "frontend f\n  acl a src -f /etc/passwd " + strings.Repeat("x", 500) + "\x1b[31m\n"
	vs := Policy{}.Check(render.Output{HAProxyConfig: long})
	if len(vs) != 1 {
		t.Fatalf("got %v", vs)
	}
	m := vs[0].Message
	if strings.ContainsAny(m, "\x1b\n") {
		t.Errorf("message carries control characters: %q", m)
	}
	if strings.Count(m, "x") > maxQuoted || !strings.Contains(m, "…") {
		t.Errorf("the quoted line is not bounded: %d bytes: %s", len(m), m)
	}
	// Each rule tells how to proceed.
	proceed := map[string]string{
		"global\n  lua-load general/x.lua\n":           "ask the Gatehouse administrator to allow Lua",
		"global\n  log \"$X\" local0\n":                "the check runs with no environment",
		"global\n  default-path parent\n":              `use "default-path config"`,
		"backend b\n  option external-check\n":         "agent-check",
		"frontend f\n  bind :1 ssl crt /etc/x.pem\n":   "refer to it as maps/<name>, general/<name> or ssl/<name>",
		"frontend f\n  bind :1 namespace a/b\n":        "use letters, digits",
		"frontend f\n  filter opentracing config x\n":  "remove the filter",
		"global\n  setenv A b\n":                       "write the values into the configuration",
		"global\n  ssl-provider legacy\n":              "remove the line",
		"global\n  ca-base /etc\n":                     "or drop ca-base",
		"frontend f\n  filter spoe config general/s\n": "",
	}
	for config, want := range proceed {
		vs := Policy{}.Check(render.Output{HAProxyConfig: config, Files: map[string]string{"s": "spoe-agent a\n  filter spoe config general/s\n"}})
		if len(vs) == 0 {
			if want != "" {
				t.Errorf("%q: no violation", config)
			}
			continue
		}
		if want == "" {
			want = "reference it from haproxy.cfg"
		}
		if !strings.Contains(vs[0].Message, want) {
			t.Errorf("%q: message %q does not say %q", config, vs[0].Message, want)
		}
	}
}

func TestPolicyDenial(t *testing.T) {
	var config strings.Builder
	config.WriteString("global\n")
	for i := 0; i < 25; i++ {
		fmt.Fprintf(&config, "  setenv V%d x\n", i)
	}
	vs := Policy{}.Check(render.Output{HAProxyConfig: config.String()})
	if len(vs) != 25 {
		t.Fatalf("got %d violations", len(vs))
	}
	lines := strings.Split(PolicyDenial(vs), "\n")
	if len(lines) != 22 || lines[0] != PolicyRefuses || lines[21] != "(5 more)" {
		t.Errorf("denial:\n%s", strings.Join(lines, "\n"))
	}
	if lines[1] != vs[0].String() || !strings.HasPrefix(lines[1], "haproxy.cfg:2: setenv: ") || !strings.HasSuffix(lines[1], "(rule no-setenv)") {
		t.Errorf("first violation line: %s", lines[1])
	}
	if got := PolicyDenial(vs[:2]); strings.Count(got, "\n") != 2 || strings.Contains(got, "more") {
		t.Errorf("two violations: %s", got)
	}
}

// TestPolicyDeterministic: the same rendering gives the same violations,
// whatever the order of the maps (many files, checked many times).
func TestPolicyDeterministic(t *testing.T) {
	out := render.Output{HAProxyConfig: "global\n  crt-base ssl\nfrontend f\n", Files: map[string]string{}, Certs: map[string]string{}, Maps: map[string]string{}}
	for i := 0; i < 40; i++ {
		name := fmt.Sprintf("f%02d", i)
		out.Files[name+".lf"] = fmt.Sprintf("%%[src,map(/etc/%d)]\n", i)
		out.Certs[name+".list"] = fmt.Sprintf("/etc/%d.pem\n", i)
		out.Maps[name] = "a b\n"
		out.HAProxyConfig += fmt.Sprintf("  http-request return status 200 content-type t lf-file general/%s.lf\n  bind :%d ssl crt-list ssl/%s.list\n  acl a%d src -f maps/%s\n", name, 1000+i, name, i, name)
	}
	first := Policy{}.Check(out)
	if len(first) != 80 {
		t.Fatalf("got %d violations, want 80", len(first))
	}
	for i := 0; i < 20; i++ {
		if got := (Policy{}).Check(out); !reflect.DeepEqual(got, first) {
			t.Fatalf("run %d differs", i)
		}
	}
	if !slices.IsSortedFunc(first, func(a, b Violation) int { return a.Line - b.Line }) {
		t.Errorf("violations are not ordered by line")
	}
}

// TestPolicyLinearTime: a line full of unterminated converters is checked
// in linear time (a tenant controls text inside lines).
func TestPolicyLinearTime(t *testing.T) {
	line := "frontend f\n  http-request set-header X " + strings.Repeat("map(", 1<<18) + "\n"
	start := time.Now()
	vs := Policy{}.Check(render.Output{HAProxyConfig: line})
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("1 MiB line took %v", d)
	}
	if len(vs) != 0 {
		t.Errorf("unterminated converters refused: %v", vs)
	}
	many := "frontend f\n  http-request set-header X " + strings.Repeat("map(/x),", 1<<16) + "\n"
	vs = Policy{}.Check(render.Output{HAProxyConfig: many})
	if len(vs) != 1 {
		t.Errorf("%d violations for one line and converter, want 1", len(vs))
	}
}

func policyFuzzSeeds() []string {
	seeds := []string{
		"global\n  lua-load general/x.lua\n",
		"frontend f\n  acl leak src -f /etc/passwd\n",
		"global\n  crt-base ssl\nfrontend f\n  bind :443 ssl crt-list ssl/l crt x.pem ca-file @system-ca\n",
		"frontend f\n  http-request return status 200 lf-file general/l\n  filter spoe config general/s\n",
		"frontend f\n  use_backend %[req.hdr(host),map('/etc/x\\',\"y)]\n",
		"global\n  log \"${X[*]}\" \"$Y\" '\\x41' \\x4 \"\n",
		"frontend f\n  http-request set-map(/a) %[src] %[src]\n  http-request del-acl(\n",
		".if defined(X)\n  setenv A b\n.endif\n[scope]\nno option external-check\n",
	}
	for _, p := range policyProbes() {
		seeds = append(seeds, p.render("/etc/passwd", "  ca-base /etc\n", "c").HAProxyConfig)
	}
	return seeds
}

// FuzzPolicyCheck: Check never panics, is deterministic, and its
// violations are well formed (a line of the configuration, a known rule,
// a one-line message).
func FuzzPolicyCheck(f *testing.F) {
	for _, s := range policyFuzzSeeds() {
		f.Add(s, "ssl/a.pem [ca-file /etc/x]\nspoe-agent a\n  acl x src -f /y\n%[src,map(/z)]\n", false)
	}
	rules := []string{RuleNoLua, RuleNoExternalCommand, RuleNoSetenv, RuleNoEnvExpansion, RuleNoEngine, RuleFileInside, RuleDefaultPath, RuleNamespaceName, RuleUnsupportedNestedConfig, RuleNoNUL, RuleLineTooLong}
	f.Fuzz(func(t *testing.T, config, aux string, allowLua bool) {
		out := render.Output{
			HAProxyConfig: config,
			Maps:          map[string]string{"m": aux},
			Files:         map[string]string{"l": aux, "s": aux},
			Certs:         map[string]string{"l": aux},
		}
		p := Policy{AllowLua: allowLua}
		first := p.Check(out)
		if again := p.Check(out); !reflect.DeepEqual(first, again) {
			t.Fatalf("not deterministic:\n%v\n%v", first, again)
		}
		lines := strings.Count(config, "\n") + 1
		for _, v := range first {
			if v.Line < 1 || v.Line > lines {
				t.Errorf("line %d outside 1..%d: %v", v.Line, lines, v)
			}
			if !slices.Contains(rules, v.Rule) {
				t.Errorf("unknown rule: %v", v)
			}
			if s := v.String(); strings.Contains(s, "\n") || len(s) > 2048 {
				t.Errorf("malformed violation (%d bytes): %q", len(s), s)
			}
		}
		if d := PolicyDenial(first); !strings.HasPrefix(d, PolicyRefuses) || strings.Count(d, "\n") > maxDeniedViolations+1 {
			t.Errorf("denial: %q", d)
		}
	})
}

func TestPolicyFuzzSeedsAreChecked(t *testing.T) {
	// The seeds exercise the refusals: most of them must be refused.
	refused := 0
	for _, s := range policyFuzzSeeds() {
		if len(Policy{}.Check(render.Output{HAProxyConfig: s, Files: map[string]string{"l": "%[src,map(/z)]"}})) > 0 {
			refused++
		}
	}
	if refused < len(policyFuzzSeeds())-1 {
		t.Errorf("only %d of %d seeds refused", refused, len(policyFuzzSeeds()))
	}
}
