package haproxy

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// sample is haproxy 2.6.12's output for a configuration with an unknown
// keyword on line 10 and a duplicate backend on line 14.
const sample = `[NOTICE]   (2729) : haproxy version is 2.6.12-1+deb12u4
[NOTICE]   (2729) : path to executable is /usr/sbin/haproxy
[ALERT]    (2729) : config : parsing [haproxy.cfg:10] : unknown keyword 'foo' in 'frontend' section
[ALERT]    (2729) : config : Parsing [haproxy.cfg:14]: backend 'be_a' has the same name as backend 'be_a' declared at haproxy.cfg:12.
[ALERT]    (2729) : config : Error(s) found in configuration file : haproxy.cfg
[ALERT]    (2729) : config : Fatal errors found in configuration.
`

const sampleConfig = `global
    default-path config
defaults
    mode http
    timeout client 5s
    timeout server 5s
    timeout connect 5s
frontend fe
    bind :8080
    foo bar
    use_backend be_a
backend be_a
    server s1 127.0.0.1:80
backend be_a
    server s1 127.0.0.1:81
`

func TestSimplify(t *testing.T) {
	long := strings.Repeat("x", 300)
	var many strings.Builder
	for i := range 100 {
		fmt.Fprintf(&many, "[ALERT]    (7) : config : parsing [haproxy.cfg:%d] : problem number %d %s\n", i%15+1, i, long)
	}
	tests := []struct {
		name, output, config, want string
	}{
		{
			name:   "haproxy 2.6 sample",
			output: sample,
			config: sampleConfig,
			want: `[ALERT] config : parsing [haproxy.cfg:10] : unknown keyword 'foo' in 'frontend' section
  line 10: foo bar
[ALERT] config : Parsing [haproxy.cfg:14]: backend 'be_a' has the same name as backend 'be_a' declared at haproxy.cfg:12.
  line 14: backend be_a
  line 12: backend be_a`,
		},
		{
			name:   "old date prefix, CRLF, line out of range",
			output: "[ALERT] 286/134512 (1234) : parsing [haproxy.cfg:99] : oops\r\n[WARNING] 286/134512 (1234) : just a warning\r\n",
			config: "global\n",
			want:   "[ALERT] parsing [haproxy.cfg:99] : oops",
		},
		{
			name:   "temporary path",
			output: "[ALERT]    (9) : config : parsing [/tmp/x/gatehouse-haproxy-123456/haproxy.cfg:1] : bad in /tmp/x/gatehouse-haproxy-123456.\n",
			config: "bad\n",
			want:   "[ALERT] config : parsing [haproxy.cfg:1] : bad in ..\n  line 1: bad",
		},
		{
			name:   "continuation lines",
			output: "[ALERT]    (9) : config : parsing [haproxy.cfg:2] : first\n    | second\n[WARNING]  (9) : unrelated\n",
			config: "global\n  thing\n",
			want:   "[ALERT] config : parsing [haproxy.cfg:2] : first\n  | second\n  line 2: thing",
		},
		{
			name:   "no alert",
			output: "\n[NOTICE]   (5) : haproxy version is 2.6.12\n[NOTICE]   (5) : path to executable is /usr/sbin/haproxy\n[WARNING]  (5) : something odd\nsegfault\n\n",
			want:   "[WARNING] something odd\nsegfault",
		},
		{
			name:   "only summaries",
			output: "[ALERT]    (5) : config : Fatal errors found in configuration.\n",
			want:   "[ALERT] config : Fatal errors found in configuration.",
		},
		{
			name:   "plain text",
			output: "  out of memory  \n",
			want:   "out of memory",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Simplify(tt.output, tt.config); got != tt.want {
				t.Errorf("Simplify =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}

	t.Run("bounded", func(t *testing.T) {
		config := strings.Repeat("line "+long+"\n", 15)
		got := Simplify(many.String(), config)
		if len(got) > maxMessage || len(got) < maxMessage/2 {
			t.Fatalf("result is %d bytes, want at most %d and not much less", len(got), maxMessage)
		}
		shown := strings.Count(got, "[ALERT]")
		if want := fmt.Sprintf("\n(%d more alerts not shown)", 100-shown); !strings.HasSuffix(got, want) {
			t.Errorf("result does not end with %q:\n…%s", want, got[len(got)-100:])
		}
		one := Simplify("[ALERT] (1) : "+strings.Repeat("é", 5000)+"\n[ALERT] (1) : second\n", "")
		if len(one) > maxMessage || !strings.HasSuffix(one, "… (1 more alerts not shown)") && !strings.HasSuffix(one, "…\n(1 more alerts not shown)") {
			t.Errorf("a single huge alert: %d bytes, ending %q", len(one), one[len(one)-40:])
		}
		if strings.ContainsRune(one, '\uFFFD') {
			t.Error("cut inside a character")
		}
		plain := Simplify(strings.Repeat("z", 10000), "")
		if len(plain) > maxMessage {
			t.Errorf("output without alerts: %d bytes", len(plain))
		}
	})
}

// TestSimplifyCapturedOutput runs haproxy as a careless caller would, with
// an absolute path, and simplifies what it really printed.
func TestSimplifyCapturedOutput(t *testing.T) {
	binary, err := findBinary("")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(t.TempDir(), "gatehouse-haproxy-*")
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(config, []byte(sampleConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	raw, err := exec.CommandContext(context.Background(), binary, "-c", "-f", config).CombinedOutput()
	if err == nil {
		t.Fatalf("haproxy accepted the broken configuration:\n%s", raw)
	}
	if !strings.Contains(string(raw), dir) || !strings.Contains(string(raw), "[ALERT]    (") {
		t.Fatalf("captured output is not what this test expects (an absolute path, 2.6's prefix):\n%s", raw)
	}
	got := Simplify(string(raw), sampleConfig)
	t.Logf("captured:\n%s\nsimplified:\n%s", raw, got)
	cleanMessage(t, got)
	want := Simplify(sample, sampleConfig)
	if got != want {
		t.Errorf("captured output simplifies to\n%s\nwant (as the literal sample)\n%s", got, want)
	}
}
