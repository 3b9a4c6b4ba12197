//go:build linux

package sandbox_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/internal/sandbox"
)

const haproxyBinary = "/usr/sbin/haproxy"

// haproxyRead is what haproxy -c needs to read besides its libraries and
// its directory: the resolver's files (server addresses are resolved at -c
// time). It also tries OpenSSL's configuration, the system CA directory,
// /etc/localtime and /sys/devices/system/{cpu/online,node} (strace), and
// does without them.
var haproxyRead = sandbox.ResolverFiles

// checkHAProxy runs haproxy -c -f haproxy.cfg confined in a directory
// holding files.
func checkHAProxy(t *testing.T, files map[string]string) result {
	t.Helper()
	return run(t, t.Context(), sandbox.Spec{
		Path: haproxyBinary,
		Args: []string{"-c", "-f", "haproxy.cfg"},
		Dir:  haproxyDir(t, files),
		Read: haproxyRead,
	})
}

// checkHAProxyUnconfined is the control: the same check as Gatehouse ran
// it before this package, to show that the attack works there.
func checkHAProxyUnconfined(t *testing.T, files map[string]string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), haproxyBinary, "-c", "-f", "haproxy.cfg")
	cmd.Dir = haproxyDir(t, files)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	out, _ := cmd.CombinedOutput()
	return string(out)
}

// haproxyDir writes files into a new directory.
func haproxyDir(t *testing.T, files map[string]string) string {
	t.Helper()
	if _, err := os.Stat(haproxyBinary); err != nil {
		t.Fatalf("%s: %v (CI installs Debian's haproxy package)", haproxyBinary, err)
	}
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const haproxyBase = `global
  default-path config
defaults
  mode http
  timeout client 5s
  timeout server 5s
  timeout connect 5s
frontend f
  bind 127.0.0.1:8080
  default_backend b
backend b
  server s1 127.0.0.1:80
`

func TestHAProxyValidConfig(t *testing.T) {
	requireConfinement(t)
	r := checkHAProxy(t, map[string]string{"haproxy.cfg": haproxyBase + "  server s2 localhost:81\n"})
	if r.err != nil {
		t.Fatalf("haproxy -c of a valid config failed confined: %v\n%s%s", r.err, r.stdout, r.stderr)
	}
}

func TestHAProxyCannotReadPasswd(t *testing.T) {
	requireConfinement(t)
	const passwdLine = "root:x:0:0"
	for name, cfg := range map[string]string{
		// A pattern file outside the directory: haproxy quotes the
		// line it cannot parse.
		"acl -f": strings.Replace(haproxyBase, "  default_backend b\n",
			"  acl x src -f /etc/passwd\n  http-request deny if x\n  default_backend b\n", 1),
		"map": strings.Replace(haproxyBase, "  default_backend b\n",
			"  http-request set-header X %[src,map_ip(/etc/passwd)]\n  default_backend b\n", 1),
		"errorfile": strings.Replace(haproxyBase, "defaults\n", "defaults\n  errorfile 503 /etc/passwd\n", 1),
	} {
		t.Run(name, func(t *testing.T) {
			files := map[string]string{"haproxy.cfg": cfg}
			if out := checkHAProxyUnconfined(t, files); name == "acl -f" && !strings.Contains(out, passwdLine) {
				t.Fatalf("control: unconfined haproxy did not quote /etc/passwd, so the test proves nothing:\n%s", out)
			}
			r := checkHAProxy(t, files)
			if out := r.stdout + r.stderr; strings.Contains(out, passwdLine) || strings.Contains(out, "/bin/bash") {
				t.Errorf("confined haproxy quoted /etc/passwd:\n%s", out)
			}
			if r.exitCode() == 0 {
				t.Errorf("haproxy -c accepted a config naming a file it must not read:\n%s%s", r.stdout, r.stderr)
			}
		})
	}
	// getpwnam cannot read it either: "user haproxy" fails under
	// confinement (configs should use uid/gid, or leave the user to the
	// container).
	r := checkHAProxy(t, map[string]string{"haproxy.cfg": strings.Replace(haproxyBase, "global\n", "global\n  user haproxy\n", 1)})
	if !strings.Contains(r.stderr, "cannot find user id") {
		t.Errorf("\"user haproxy\": want the user unknown, got exit %d:\n%s%s", r.exitCode(), r.stdout, r.stderr)
	}
}

func TestHAProxyLuaCannotEscape(t *testing.T) {
	requireConfinement(t)
	out, err := exec.Command(haproxyBinary, "-vv").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Built with Lua") {
		t.Fatalf("%s -vv: no Lua (%v); the test needs Debian's haproxy, built with Lua:\n%s", haproxyBinary, err, out)
	}
	secret := marker(t)
	t.Setenv("GATEHOUSE_TEST_SECRET", secret)
	markers := t.TempDir()
	exe, pop, open := filepath.Join(markers, "os.execute"), filepath.Join(markers, "io.popen"), filepath.Join(markers, "io.open")
	lua := fmt.Sprintf(`
os.execute("touch %[1]s")
local p = io.popen("touch %[2]s")
if p then p:close() end
local f = io.open("%[3]s", "w")
if f then f:write("x") f:close() end
local env = os.getenv("GATEHOUSE_TEST_SECRET")
if env then error("env: " .. env) end
local pw = io.open("/etc/passwd")
if pw then error("passwd: " .. pw:read("a")) end
`, exe, pop, open)
	files := map[string]string{
		"haproxy.cfg":   strings.Replace(haproxyBase, "global\n", "global\n  lua-load general/x.lua\n", 1),
		"general/x.lua": lua,
	}
	// Control: unconfined, the script runs its commands and writes.
	control := checkHAProxyUnconfined(t, files)
	for _, m := range []string{exe, pop, open} {
		if _, err := os.Stat(m); err != nil {
			t.Fatalf("control: unconfined Lua did not create %s, so the test proves nothing: %v\n%s", m, err, control)
		}
		os.Remove(m)
	}

	r := checkHAProxy(t, files)
	for _, m := range []string{exe, pop, open} {
		if _, err := os.Stat(m); err == nil {
			t.Errorf("confined Lua created %s", filepath.Base(m))
		}
	}
	if out := r.stdout + r.stderr; strings.Contains(out, secret) || strings.Contains(out, "root:x:0:0") {
		t.Errorf("confined Lua leaked the environment or /etc/passwd:\n%s", out)
	}
	// The script ran to its end: it was loaded, and each attempt failed.
	if r.err != nil {
		t.Errorf("haproxy -c with the Lua script: %v\n%s%s", r.err, r.stdout, r.stderr)
	}
}
