package render

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
)

// tenantAnnotation is the annotation the example config prints as a
// backend name.
const tenantAnnotation = "haproxy.gatehouse.dev/backend-name"

// tenantData holds one Ingress a tenant wrote: value is in its
// spec.value, in a list at spec.list, and in the backend-name annotation.
func tenantData(t testing.TB, value string) Data {
	t.Helper()
	ingress := map[string]any{
		"metadata": map[string]any{
			"namespace":   "tenant",
			"name":        "web",
			"annotations": map[string]any{tenantAnnotation: value},
		},
		"spec": map[string]any{"value": value, "list": []any{"a", value}},
	}
	return Data{Resources: map[string]Store{
		"ingresses": mustStore(t, mustIndexer(t, "metadata.namespace", "metadata.name"), ingress),
	}}
}

// tenantPrinters print the tenant's value, on line 2 of haproxy.cfg, in
// every way a template can; snippets holds the snippets some use.
var tenantPrinters = []struct {
	name, action string
	// where the error is located: haproxy.cfg:2 unless a snippet prints
	location string
}{
	{"plain", `{{ $o.spec.value }}`, ""},
	{"annotation by index", `{{ index $o.metadata.annotations "haproxy.gatehouse.dev/backend-name" }}`, ""},
	{"printf %s", `{{ printf "%s-%s" "be" $o.spec.value }}`, ""},
	{"print", `{{ print $o.spec.value }}`, ""},
	{"a map holding it", `{{ $o.spec }}`, ""},
	{"a list holding it", `{{ list "x" $o.spec.value }}`, ""},
	{"a list field", `{{ $o.spec.list }}`, ""},
	{"a dict", `{{ dict "k" $o.spec.value }}`, ""},
	{"piped through string functions", `{{ $o.spec.value | lower | replace "a" "b" | trim | trunc 200 }}`, ""},
	{"cat", `{{ cat "x" $o.spec.value }}`, ""},
	{"join", `{{ join "," $o.spec.list }}`, ""},
	{"b64 round trip", `{{ b64enc $o.spec.value | b64dec }}`, ""},
	{"with", `{{ with $o.spec.value }}{{ . }}{{ end }}`, ""},
	{"range", `{{ range $o.spec.list }}{{ . }}{{ end }}`, ""},
	{"variable", `{{ $v := $o.spec.value }}{{ $v }}`, ""},
	{"template", `{{ template "show" $o }}`, "show:1:"},
	{"block", `{{ block "inline" $o }}{{ .spec.value }}{{ end }}`, "haproxy.cfg:2:"},
	{"render piped to indent", `{{ render "show-first" | indent 2 }}`, "show-first:1:"},
	{"renderGlob", `{{ renderGlob "show-f*" }}`, "show-first:1:"},
}

var tenantSnippets = map[string]string{
	"show":       `{{ .spec.value }}`,
	"show-first": `{{ (index .resources.ingresses.List 0).spec.value }}`,
}

func tenantTemplate(action string) string {
	return "global\n  {{ range $o := .resources.ingresses.List }}" + action + "{{ end }}\n  daemon"
}

// TestPrintedLineBreaksAndControlCharactersAreRefused: a tenant's value
// with a line break (or another control character) printed in any way is a
// render error naming the template and position, quoting the value and
// saying what to do, never extra lines in haproxy.cfg.
func TestPrintedLineBreaksAndControlCharactersAreRefused(t *testing.T) {
	values := []string{
		"x\nacl leak src -f /etc/passwd",
		"x\racl leak src -f /etc/passwd",
		"x\r\nbackend evil",
		"x\x00y",
		"x\u2028acl leak src -f /etc/passwd",
		"x\u2029y",
		"x\u0085y",
		"x\x1b[2Jy",
		"x\x7fy",
		"x\x0by",
	}
	for _, printer := range tenantPrinters {
		for _, value := range values {
			t.Run(printer.name+"/"+strconv.Quote(value), func(t *testing.T) {
				output, err := compile(t, Templates{Snippets: tenantSnippets, HAProxyConfig: tenantTemplate(printer.action)}).
					Render(context.Background(), tenantData(t, value))
				var unsafeErr *UnsafeValueError
				if !errors.As(err, &unsafeErr) {
					t.Fatalf("err = %v, haproxy.cfg = %q; want an *UnsafeValueError", err, output.HAProxyConfig)
				}
				var renderErr *RenderError
				if !errors.As(err, &renderErr) || renderErr.Template != "haproxyConfig" {
					t.Fatalf("err = %v, want a *RenderError of haproxyConfig", err)
				}
				location := printer.location
				if location == "" {
					location = "haproxy.cfg:2:"
				}
				message := err.Error()
				for _, want := range []string{location, strconv.Quote(value)[1:4], "may not contain a line break or control character", "field it comes from must not contain one", "| trusted"} {
					if !strings.Contains(message, want) {
						t.Errorf("message %q does not contain %q", message, want)
					}
				}
				if output.HAProxyConfig != "" {
					t.Errorf("haproxy.cfg = %q alongside the error", output.HAProxyConfig)
				}
			})
		}
	}
}

// TestPrintedValuesThatStayOnTheirLine are printed as they are: tabs,
// non-ASCII text, and text escaped by the template (quote, toJson).
func TestPrintedValuesThatStayOnTheirLine(t *testing.T) {
	tests := []struct{ value, action, want string }{
		{"a\tb", `{{ $o.spec.value }}`, "a\tb"},
		{"café ✓ \uFFFD", `{{ $o.spec.value }}`, "café ✓ \uFFFD"},
		{"x\nacl", `{{ quote $o.spec.value }}`, `"x\nacl"`},
		{"x\nacl\u2028", `{{ toJson $o.spec.value }}`, `"x\nacl\u2028"`},
		{"x\nacl", `{{ $o.spec.value | b64enc }}`, "eAphY2w="},
		{"x\nacl", `{{ len $o.spec.value }}`, "5"},
		{"", `[{{ $o.spec.value }}{{ $o.spec.missing }}{{ $o.spec.missing.deeper }}]`, "[]"},
	}
	for _, tt := range tests {
		t.Run(tt.action, func(t *testing.T) {
			output, err := compile(t, Templates{HAProxyConfig: tenantTemplate(tt.action)}).Render(context.Background(), tenantData(t, tt.value))
			if err != nil {
				t.Fatal(err)
			}
			if want := "global\n  " + tt.want + "\n  daemon\n"; output.HAProxyConfig != want {
				t.Errorf("haproxy.cfg = %q, want %q", output.HAProxyConfig, want)
			}
		})
	}
}

// TestPrintedInvalidUTF8IsRefused: bytes that are not UTF-8 could, next to
// another value's bytes, make U+2028; Kubernetes never stores them, but a
// template can make them (b64dec).
func TestPrintedInvalidUTF8IsRefused(t *testing.T) {
	for _, action := range []string{`{{ $o.spec.value }}`, `{{ $o.spec.value | b64dec }}`} {
		value := "x\xe2\x80"
		if strings.Contains(action, "b64dec") {
			value = "eOKA" // base64 of x\xe2\x80
		}
		_, err := compile(t, Templates{HAProxyConfig: tenantTemplate(action)}).Render(context.Background(), tenantData(t, value))
		var unsafeErr *UnsafeValueError
		if !errors.As(err, &unsafeErr) || unsafeErr.Byte != 0xe2 || !strings.Contains(err.Error(), "the byte 0xE2, which is not UTF-8") {
			t.Errorf("%s: err = %v, want the byte 0xE2 refused", action, err)
		}
	}
}

// TestUnsafeValueErrorQuotesABoundedExcerpt: a megabyte value is not
// copied into the error, and the excerpt shows the refused character.
func TestUnsafeValueErrorQuotesABoundedExcerpt(t *testing.T) {
	value := strings.Repeat("a", 1<<20) + "\nacl leak" + strings.Repeat("b", 1<<20)
	_, err := compile(t, Templates{HAProxyConfig: tenantTemplate(`{{ $o.spec.value }}`)}).Render(context.Background(), tenantData(t, value))
	var unsafeErr *UnsafeValueError
	if !errors.As(err, &unsafeErr) {
		t.Fatalf("err = %v", err)
	}
	if len(err.Error()) > 1000 || !strings.Contains(err.Error(), `aaaa\nacl leakbbbb`) || !strings.Contains(err.Error(), "(cut)") ||
		!strings.Contains(err.Error(), "at byte 1048576") {
		t.Errorf("error = %.2000q", err.Error())
	}
}

// TestTrustedPrintsMultiLineText: the marker ending an action lets its
// text through unescaped; a missing field still prints nothing.
func TestTrustedPrintsMultiLineText(t *testing.T) {
	tests := []struct{ action, want string }{
		{`{{ $o.spec.value | trusted }}`, "line one\n  line two"},
		{`{{ trusted $o.spec.value }}`, "line one\n  line two"},
		{`{{ toPrettyJson $o.spec.list | trusted }}`, "[\n  \"a\",\n  \"line one\\n  line two\"\n]"},
		{`[{{ $o.spec.missing | trusted }}]`, "[]"},
	}
	for _, tt := range tests {
		t.Run(tt.action, func(t *testing.T) {
			output, err := compile(t, Templates{HAProxyConfig: tenantTemplate(tt.action)}).
				Render(context.Background(), tenantData(t, "line one\n  line two"))
			if err != nil {
				t.Fatal(err)
			}
			if want := "global\n  " + tt.want + "\n  daemon\n"; output.HAProxyConfig != want {
				t.Errorf("haproxy.cfg = %q, want %q", output.HAProxyConfig, want)
			}
		})
	}
	// Without the marker, the same multi-line JSON is refused.
	_, err := compile(t, Templates{HAProxyConfig: tenantTemplate(`{{ toPrettyJson $o.spec.list }}`)}).
		Render(context.Background(), tenantData(t, "plain"))
	var unsafeErr *UnsafeValueError
	if !errors.As(err, &unsafeErr) {
		t.Errorf("toPrettyJson without trusted: err = %v, want an *UnsafeValueError", err)
	}
}

// TestTrustedOnlyEndsAPrintingAction: anywhere else, trusted would mark
// nothing; it is a compile error naming the position. So are the
// functions the rewrite inserts.
func TestTrustedOnlyEndsAPrintingAction(t *testing.T) {
	tests := []struct{ name, text, want string }{
		{"stored in a variable", "a\n{{ $x := .v | trusted }}{{ $x }}", "haproxy.cfg:2:"},
		{"followed by a function", `{{ trusted .v | upper }}`, "trusted may only end a printing action"},
		{"as an argument", `{{ upper (trusted .v) }}`, "trusted may only end a printing action"},
		{"in if", `{{ if trusted .v }}x{{ end }}`, "trusted may only end a printing action"},
		{"in range", `{{ range trusted .v }}x{{ end }}`, "trusted may only end a printing action"},
		{"as a template's data", `{{ define "t" }}{{ . }}{{ end }}{{ template "t" (trusted .v) }}`, "trusted may only end a printing action"},
		{"inserted guard", `{{ _gatehouseLeaveTemplate }}`, `function "_gatehouseLeaveTemplate" is reserved`},
		{"escaping step", `{{ $x := _gatehouseEscape "a" }}`, `function "_gatehouseEscape" is reserved`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := goTemplateEngine{}.Compile(Templates{HAProxyConfig: tt.text})
			var compileErr *CompileError
			if !errors.As(err, &compileErr) || compileErr.Template != "haproxyConfig" || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want a *CompileError of haproxyConfig containing %q", err, tt.want)
			}
		})
	}
	inSnippet := Templates{Snippets: map[string]string{"s": `{{ upper (trusted .) }}`}, HAProxyConfig: "x"}
	if _, err := (goTemplateEngine{}).Compile(inSnippet); err == nil || !strings.Contains(err.Error(), "compile templateSnippets[s]: s:1:") {
		t.Errorf("in a snippet: err = %v, want it named with its position", err)
	}
}

// TestRenderedSnippetsAreNotEscapedAgain: the text of render and
// renderGlob, followed only by layout functions, prints as it is; anything
// else done with it is a printed value like any other.
func TestRenderedSnippetsAreNotEscapedAgain(t *testing.T) {
	snippets := map[string]string{
		"defaults-1": "timeout connect 5s\ntimeout client {{ .extraContext.timeout }}s",
		"defaults-2": "\ntimeout server 5s",
	}
	data := Data{ExtraContext: map[string]any{"timeout": 30.0}}
	tests := []struct{ config, want string }{
		{`{{ render "defaults-1" }}`, "timeout connect 5s\ntimeout client 30s\n"},
		{"defaults\n{{ render \"defaults-1\" | indent 2 }}", "defaults\n  timeout connect 5s\n  timeout client 30s\n"},
		{`defaults{{ renderGlob "defaults-*" | nindent 2 }}`, "defaults\n  timeout connect 5s\n  timeout client 30s\n  timeout server 5s\n"},
		{`[{{ render "defaults-2" | trim | trimPrefix "timeout " | trimSuffix "s" }}]`, "[server 5]\n"},
		{`{{ render "defaults-1" | upper | trusted }}`, "TIMEOUT CONNECT 5S\nTIMEOUT CLIENT 30S\n"},
	}
	for _, tt := range tests {
		got, err := renderConfig(t, snippets, tt.config, data)
		if err != nil || got != tt.want {
			t.Errorf("%s: haproxy.cfg = %q, %v; want %q", tt.config, got, err, tt.want)
		}
	}
	for _, refused := range []string{
		`{{ render "defaults-1" | upper }}`,
		`{{ $s := render "defaults-1" }}{{ $s }}`,
		`{{ "defaults-1" | render }}`,
		`{{ (render "defaults-1") }}`,
		`{{ printf "%s" (render "defaults-1") }}`,
		`{{ render "defaults-1" | replace "x" "y" }}`,
	} {
		_, err := renderConfig(t, snippets, refused, data)
		var unsafeErr *UnsafeValueError
		if !errors.As(err, &unsafeErr) {
			t.Errorf("%s: err = %v, want an *UnsafeValueError", refused, err)
		}
	}
}

// TestFailMessagesAreNotEscaped: fail's message is the denial reason, not
// configuration; it keeps its line breaks and the tenant's value.
func TestFailMessagesAreNotEscaped(t *testing.T) {
	_, err := compile(t, Templates{HAProxyConfig: tenantTemplate(`{{ fail (printf "bad name %s\nsee docs" $o.spec.value) }}`)}).
		Render(context.Background(), tenantData(t, "x\ny"))
	var failErr *FailError
	if !errors.As(err, &failErr) || failErr.Message != "bad name x\ny\nsee docs" {
		t.Fatalf("err = %v, want a *FailError with the message as written", err)
	}
}
