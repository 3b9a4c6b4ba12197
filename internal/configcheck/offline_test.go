package configcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// editedExample is the example config with old replaced by new (once,
// which must happen).
func editedExample(t *testing.T, old, new string) []byte {
	t.Helper()
	text := string(exampleYAML(t))
	if strings.Count(text, old) != 1 {
		t.Fatalf("the example config does not contain %q exactly once", old)
	}
	return []byte(strings.Replace(text, old, new, 1))
}

func TestOfflineRuns(t *testing.T) {
	failing := func(t *testing.T) []byte {
		return editedExample(t, `pattern: "backend be_app_api_80"}`, `pattern: "backend be_nowhere"}`)
	}
	cases := []struct {
		name       string
		config     func(*testing.T) []byte
		opts       OfflineOptions
		wantPassed bool
		wantErr    string
		wantOut    []string
	}{
		{name: "example passes", config: exampleYAML, wantPassed: true,
			wantOut: []string{"PASS  ok-single-ingress", "PASS  shared-backend-once", "PASS  missing-service-is-rejected",
				"PASS  annotation-with-a-line-break-is-refused", "PASS  annotation-names-the-backend", "\n5/5 tests passed\n"}},
		{name: "explicit summary", config: exampleYAML, opts: OfflineOptions{Output: "summary"}, wantPassed: true,
			wantOut: []string{"5/5 tests passed"}},
		{name: "one test alone", config: exampleYAML, opts: OfflineOptions{Test: "shared-backend-once"}, wantPassed: true,
			wantOut: []string{"PASS  shared-backend-once", "1/1 tests passed"}},
		{name: "a failing test", config: failing, wantPassed: false,
			wantOut: []string{"FAIL  ok-single-ingress", "backend be_nowhere", "PASS  shared-backend-once", "4/5 tests passed"}},
		{name: "a failing test not run", config: failing, opts: OfflineOptions{Test: "shared-backend-once"}, wantPassed: true,
			wantOut: []string{"1/1 tests passed"}},
		{name: "unknown output", config: exampleYAML, opts: OfflineOptions{Output: "xml"},
			wantErr: `--output "xml": want summary or json`},
		{name: "strict decoding refuses a typo", config: func(t *testing.T) []byte {
			return editedExample(t, "fieldSelector: spec.ingressClassName=haproxy", "fieldSelektor: spec.ingressClassName=haproxy")
		}, wantErr: "fieldSelektor"},
		{name: "not YAML", config: func(*testing.T) []byte { return []byte("spec: [unclosed") },
			wantErr: "reading the config"},
		{name: "invalid config", config: func(t *testing.T) []byte {
			return editedExample(t, "  validationTests:\n", "  validationWebhook: {timeoutSeconds: 99}\n  validationTests:\n")
		}, wantErr: "the config is invalid"},
		{name: "missing haproxy", config: exampleYAML, opts: OfflineOptions{HAProxyBinary: "/nonexistent/haproxy"},
			wantErr: "haproxy not found"},
		// A relative root is the working directory's, as a shell means it.
		{name: "a relative haproxy root", config: exampleYAML, opts: OfflineOptions{HAProxyRoot: "no-such-root"},
			wantErr: filepath.Join(mustGetwd(t), "no-such-root")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var out bytes.Buffer
			passed, err := TestOffline(ctx, tc.config(t), tc.opts, &out)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q (output %s)", err, tc.wantErr, out.String())
				}
				if passed {
					t.Fatalf("passed with an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if passed != tc.wantPassed {
				t.Fatalf("passed %v, want %v; output:\n%s", passed, tc.wantPassed, out.String())
			}
			for _, want := range tc.wantOut {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output does not contain %q:\n%s", want, out.String())
				}
			}
		})
	}
}

func TestOfflineJSONOutput(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		config                []byte
		wantPassed            bool
		wantTotal, wantFailed int
	}{
		{"passing", exampleYAML(t), true, 5, 0},
		{"failing", editedExample(t, `{type: contains, pattern: 'server s1 10\.0\.0\.10:80'}`, `{type: contains, pattern: 'server s9'}`), false, 5, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			passed, err := TestOffline(context.Background(), tc.config, OfflineOptions{Output: "json"}, &out)
			if err != nil {
				t.Fatal(err)
			}
			if passed != tc.wantPassed {
				t.Fatalf("passed %v, want %v", passed, tc.wantPassed)
			}
			var report struct {
				Results []struct {
					Name     string
					Passed   bool
					Failures []struct{ Assertion, Message string }
				}
				Total, Failed int
			}
			if err := json.Unmarshal(out.Bytes(), &report); err != nil {
				t.Fatalf("output is not JSON: %v\n%s", err, out.String())
			}
			if report.Total != tc.wantTotal || report.Failed != tc.wantFailed || len(report.Results) != tc.wantTotal {
				t.Fatalf("total %d failed %d results %d: %s", report.Total, report.Failed, len(report.Results), out.String())
			}
			names := map[string]bool{}
			for _, r := range report.Results {
				names[r.Name] = r.Passed
			}
			if _, ok := names["ok-single-ingress"]; !ok || names["ok-single-ingress"] == (tc.wantFailed > 0) {
				t.Fatalf("ok-single-ingress: %v in %s", names, out.String())
			}
		})
	}
}

func TestOfflineDumpRendered(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	passed, err := TestOffline(context.Background(), exampleYAML(t), OfflineOptions{DumpRendered: dir}, &out)
	if err != nil || !passed {
		t.Fatalf("passed %v err %v:\n%s", passed, err, out.String())
	}
	for _, tc := range []struct{ path, want string }{
		{"ok-single-ingress/haproxy.cfg", "backend be_app_api_80"},
		{"ok-single-ingress/haproxy.cfg", "server s1 10.0.0.10:80"},
		{"ok-single-ingress/maps/hosts.map", "a.example be_app_api_80"},
		{"shared-backend-once/maps/hosts.map", "b.example be_app_api_80"},
	} {
		data, err := os.ReadFile(filepath.Join(dir, tc.path))
		if err != nil {
			t.Errorf("%s: %v", tc.path, err)
			continue
		}
		if !strings.Contains(string(data), tc.want) {
			t.Errorf("%s does not contain %q:\n%s", tc.path, tc.want, data)
		}
	}
}

func mustGetwd(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
