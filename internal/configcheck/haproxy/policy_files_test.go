package haproxy

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// crtListPad fills a crt-list read up to haproxy's 65,535 bytes: prefix,
// then 'x' up to the limit.
func crtListPad(prefix string) string {
	return prefix + strings.Repeat("x", crtListLineSize-1-len(prefix))
}

// crtListCase is a crt-list whose certificates are missing files inside
// the check's directory: haproxy names each one it stats.
type crtListCase struct {
	name    string
	content string
	// want is what readCrtList must return: the certificate paths (first
	// words) of the lines haproxy parses, and where it stops.
	want     []string
	stop     crtListStop
	stopLine int
	// refused is the rule the policy refuses the file with, "" for none.
	refused string
}

func crtListCases() []crtListCase {
	return []crtListCase{
		{name: "plain lines, comments, CR and CRLF",
			content: "ssl/c1\nssl/c2 [verify none] a.test\n#ssl/comment\n\n\rssl/cr\nssl/c3\r\nssl/c4",
			want:    []string{"ssl/c1", "ssl/c2", "ssl/c3", "ssl/c4"}},
		{name: "the attack: a comment, a NUL, padding to 65535 bytes, then a path",
			content: crtListPad("#\x00") + "ssl/hidden\n",
			want:    []string{"ssl/hidden"}, refused: RuleNoNUL},
		{name: "two padded comments in a row",
			content: crtListPad("#\x00") + crtListPad("#\x00") + "ssl/hidden2\nssl/c1\n",
			want:    []string{"ssl/hidden2", "ssl/c1"}, refused: RuleNoNUL},
		{name: "a NUL in a comment ended by its newline",
			content: "#\x00ssl/not-read\nssl/c1\n",
			want:    []string{"ssl/c1"}, refused: RuleNoNUL},
		{name: "a NUL in a certificate line stops the file at the next read",
			content: "ssl/c1\x00ssl/cut\nssl/c2\n",
			want:    []string{"ssl/c1"}, stop: crtListStrayNUL, stopLine: 1, refused: RuleNoNUL},
		{name: "a NUL in the last line",
			content: "ssl/c1\nssl/c2\x00ssl/tail",
			want:    []string{"ssl/c1", "ssl/c2"}, refused: RuleNoNUL},
		{name: "the longest line haproxy reads",
			content: "ssl/c1" + strings.Repeat(" ", crtListLineSize-2-len("ssl/c1")) + "\nssl/c2\n",
			want:    []string{"ssl/c1", "ssl/c2"}},
		{name: "one byte longer",
			content: "ssl/c1" + strings.Repeat(" ", crtListLineSize-1-len("ssl/c1")) + "\nssl/c2\n",
			stop:    crtListTooLong, stopLine: 1, refused: RuleLineTooLong},
		{name: "a long comment without a NUL is too long too",
			content: "ssl/c1\n#" + strings.Repeat("x", crtListLineSize) + "\nssl/c2\n",
			want:    []string{"ssl/c1"}, stop: crtListTooLong, stopLine: 2, refused: RuleLineTooLong},
		{name: "a last line without newline at the limit",
			content: "ssl/c1\nssl/c2" + strings.Repeat(" ", crtListLineSize-1-len("ssl/c2")),
			want:    []string{"ssl/c1"}, stop: crtListTooLong, stopLine: 2, refused: RuleLineTooLong},
	}
}

func crtListPaths(f crtListFile) []string {
	var out []string
	for _, l := range f.lines {
		if words := splitCrtListLine(l.text); len(words) > 0 {
			out = append(out, words[0])
		}
	}
	return out
}

func crtListOutput(content string) render.Output {
	return render.Output{
		HAProxyConfig: strings.ReplaceAll(probeFrontend, "{{GLOBAL}}", "") + "  bind :18081 ssl crt-list ssl/probe.list\n",
		Certs:         map[string]string{"probe.list": content},
	}
}

// crtListRef is the line of crtListOutput's haproxy.cfg naming the crt-list.
var crtListRef = strings.Count(crtListOutput("").HAProxyConfig, "\n")

func rulesOf(vs []Violation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Rule)
	}
	return out
}

// TestReadCrtList: the reader returns the lines crtlist_parse_file parses,
// and the policy refuses what only a C reader's details would tell apart.
func TestReadCrtList(t *testing.T) {
	for _, c := range crtListCases() {
		t.Run(c.name, func(t *testing.T) {
			f := readCrtList(c.content)
			if got := crtListPaths(f); !slices.Equal(got, c.want) {
				t.Errorf("certificates %q, want %q", got, c.want)
			}
			if f.stop != c.stop || f.stopLine != c.stopLine {
				t.Errorf("stop %d at line %d, want %d at %d", f.stop, f.stopLine, c.stop, c.stopLine)
			}
			vs := Policy{}.Check(crtListOutput(c.content))
			switch {
			case c.refused == "" && len(vs) > 0:
				t.Errorf("refused: %v", vs)
			case c.refused != "" && !slices.Contains(rulesOf(vs), c.refused):
				t.Errorf("not refused with %s: %v", c.refused, vs)
			}
			for _, v := range vs {
				if v.Line != crtListRef || !strings.Contains(v.Message, "in ssl/probe.list line ") {
					t.Errorf("violation not on the crt-list line, naming the file's line: %v", v)
				}
			}
		})
	}
}

// TestPolicyReadsTheHiddenCrtListLine is the attack as it was reported: a
// comment, a NUL byte, padding to haproxy's 65,535-byte read, then an
// outside path. haproxy stats the path; the policy, reading as haproxy
// does, refuses it, and refuses the NUL.
func TestPolicyReadsTheHiddenCrtListLine(t *testing.T) {
	vs := Policy{}.Check(crtListOutput(crtListPad("#\x00") + "/etc/hostname\n"))
	if !hasViolation(vs, crtListRef, RuleFileInside, "crt-list") {
		t.Errorf("the hidden path is not refused: %v", vs)
	}
	if !hasViolation(vs, crtListRef, RuleNoNUL, "NUL") {
		t.Errorf("the NUL is not refused: %v", vs)
	}
	for _, v := range vs {
		if v.Rule == RuleFileInside && !strings.Contains(v.Message, "in ssl/probe.list line 2: ") {
			t.Errorf("the path is not placed on haproxy's line 2: %v", v)
		}
	}
}

func TestPolicyRefusesNULInEveryConfigurationFile(t *testing.T) {
	spoe := "frontend f\n  filter spoe engine x config general/spoe.conf\n"
	lf := "frontend f\n  http-request return status 200 content-type t lf-file general/x.lf\n"
	for _, tt := range []struct {
		name string
		out  render.Output
		line int
	}{
		{"haproxy.cfg", render.Output{HAProxyConfig: "global\n  log stdout\x00 local0\nfrontend f\n"}, 2},
		{"a SPOE configuration", render.Output{HAProxyConfig: spoe, Files: map[string]string{"spoe.conf": "[x]\nspoe-agent a\x00\n"}}, 2},
		{"an lf-file", render.Output{HAProxyConfig: lf, Files: map[string]string{"x.lf": "hello\x00%[src,map(/etc/passwd)]\n"}}, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			vs := Policy{}.Check(tt.out)
			if !hasViolation(vs, tt.line, RuleNoNUL, "NUL") {
				t.Errorf("no %s violation on line %d: %v", RuleNoNUL, tt.line, vs)
			}
		})
	}
	// An unreferenced map, certificate or general file may hold any bytes:
	// haproxy does not read it as configuration.
	if vs := (Policy{}).Check(render.Output{HAProxyConfig: "frontend f\n", Maps: map[string]string{"m": "a\x00b\n"}, Certs: map[string]string{"c.pem": "\x00"}}); len(vs) > 0 {
		t.Errorf("refused: %v", vs)
	}
}

// TestPolicyReadsAnLfFileWhole: haproxy parses an lf-file as one string,
// so a converter's argument may span its lines. Read line by line, the map
// below names "maps", inside; haproxy reads "maps\n/../../../etc/passwd",
// which cleans to a path outside the directory.
func TestPolicyReadsAnLfFileWhole(t *testing.T) {
	out := render.Output{
		HAProxyConfig: "frontend f\n  http-request return status 200 content-type t lf-file general/x.lf\n",
		Files:         map[string]string{"x.lf": "line one\n%[src,map(maps\n/../../../etc/passwd,x)]\n"},
	}
	vs := Policy{}.Check(out)
	if !hasViolation(vs, 2, RuleFileInside, "map") {
		t.Fatalf("the argument spanning lines 2 and 3 is not refused: %v", vs)
	}
	if !strings.Contains(vs[0].Message, "in general/x.lf line 2: ") {
		t.Errorf("not placed on the file's line 2, where the converter starts: %v", vs[0])
	}
}

var (
	lineTooLong  = regexp.MustCompile(`parsing \[[^\]]*probe\.list:(\d+)\]: line too long`)
	strayNULLine = regexp.MustCompile(`parsing \[[^\]]*probe\.list:(\d+)\]: Stray NUL character`)
	missingLF    = regexp.MustCompile(`parsing \[[^\]]*probe\.list:\d+\]: Missing LF on last line`)
	// candidate is every certificate path the cases may name.
	candidate = regexp.MustCompile(`ssl/[a-z0-9]+`)
)

// runCrtList runs the real haproxy -c, confined as every check is, on
// crtListOutput(content) with a certificate at each path of present and a
// FIFO at each path of fifos (all ssl/<name>). It returns what haproxy
// printed and the FIFOs it opened: haproxy's messages do not say which
// certificates it read (a later error replaces the message naming a
// missing one), an open does.
func runCrtList(t *testing.T, h testedHAProxy, content, cert string, present, fifos []string) (string, map[string]bool) {
	t.Helper()
	out := crtListOutput(content)
	for _, p := range present {
		out.Certs[strings.TrimPrefix(p, CertsDir+"/")] = cert
	}
	confine := Confinement{}.withDefaults()
	// A run that never reached haproxy (the confinement's trampoline, a
	// Go program, can fail to allocate under the address-space limit it
	// has just set) is tried again: it says nothing about haproxy.
	for attempt := 0; ; attempt++ {
		dir := t.TempDir()
		if err := writeTree(dir, out); err != nil {
			t.Fatal(err)
		}
		for _, f := range fifos {
			if err := syscall.Mkfifo(filepath.Join(dir, f), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd, err := confine.command(ctx, h.root, h.binary, []string{"-c", "-V", "-f", ConfigFile}, dir)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		var output bytes.Buffer
		cmd.Stdout, cmd.Stderr = &output, &output
		if err := cmd.Start(); err != nil {
			cancel()
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			_ = cmd.Wait() // a missing certificate fails the check
			close(done)
		}()
		var mu sync.Mutex
		opened := map[string]bool{}
		var wg sync.WaitGroup
		for _, f := range fifos {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if waitForReader(ctx, filepath.Join(dir, f), done) {
					mu.Lock()
					opened[f] = true
					mu.Unlock()
				}
			}()
		}
		<-done
		wg.Wait()
		late := ctx.Err()
		cancel()
		if late != nil {
			t.Fatalf("haproxy -c did not finish: %v", late)
		}
		text := output.String()
		if strings.Contains(text, "haproxy version is") || strings.Contains(text, "Configuration file is valid") {
			return text, opened
		}
		if attempt == 2 {
			t.Fatalf("haproxy -c did not run: %s", bound(text, 2000))
		}
	}
}

// TestCrtListReadingAgainstHAProxy is the differential test of the reader:
// the real haproxy -c, confined, reads each crt-list of crtListCases, and
// must read exactly the certificate lines readCrtList returns, and stop
// where it stops. Each case runs once with a certificate at every path the
// reader returns and a FIFO at every other path the file's bytes hold
// (haproxy must open none of those, and stop where the reader stops), and
// once more per path the reader returns with a FIFO there (haproxy must
// open it: it read that line, as that path). Cases the policy refuses are
// run too: the reader must be right about them, the refusal is the second
// line.
func TestCrtListReadingAgainstHAProxy(t *testing.T) {
	for _, h := range testedHAProxies(t) {
		t.Run(h.branch, func(t *testing.T) { crtListReadingAgainst(t, h) })
	}
}

func crtListReadingAgainst(t *testing.T, h testedHAProxy) {
	cert := selfSigned(t)
	for _, c := range crtListCases() {
		t.Run(c.name, func(t *testing.T) {
			f := readCrtList(c.content)
			paths := crtListPaths(f)
			var others []string
			for _, p := range candidate.FindAllString(c.content, -1) {
				if !slices.Contains(paths, p) && !slices.Contains(others, p) {
					others = append(others, p)
				}
			}
			text, opened := runCrtList(t, h, c.content, cert, paths, others)
			for p := range opened {
				t.Errorf("haproxy opens %s, which the reader does not read (it reads %q); haproxy said:\n%s", p, paths, bound(text, 2000))
			}
			tooLong, stray := lineTooLong.FindStringSubmatch(text), strayNULLine.FindStringSubmatch(text)
			switch f.stop {
			case crtListTooLong:
				if tooLong == nil || tooLong[1] != fmt.Sprint(f.stopLine) {
					t.Errorf("haproxy does not stop at line %d as too long; it said:\n%s", f.stopLine, bound(text, 2000))
				}
			case crtListStrayNUL:
				if stray == nil || stray[1] != fmt.Sprint(f.stopLine) {
					t.Errorf("haproxy does not stop at line %d for a stray NUL; it said:\n%s", f.stopLine, bound(text, 2000))
				}
			default:
				if tooLong != nil || stray != nil {
					t.Errorf("haproxy stops early, the reader reads to the end; haproxy said:\n%s", bound(text, 2000))
				}
				if got := missingLF.MatchString(text); got != f.missingLF {
					t.Errorf("haproxy says the last line lacks its newline: %v, the reader: %v; haproxy said:\n%s", got, f.missingLF, bound(text, 2000))
				}
			}
			for i, p := range paths {
				present := slices.Concat(paths[:i], paths[i+1:])
				if text, opened := runCrtList(t, h, c.content, cert, present, []string{p}); !opened[p] {
					t.Errorf("haproxy does not open %s, line %d of the reader; it said:\n%s", p, f.lines[i].number, bound(text, 2000))
				}
			}
		})
	}
	// A read starting with a NUL reaches crtlist_parse_line as an empty
	// string, which leaves the caller's certificate pointer unset: what
	// haproxy reads then depends on its compiler. The reader marks the
	// line, and the policy refuses the file whatever haproxy does.
	t.Run("a read starting with a NUL", func(t *testing.T) {
		content := "  ssl/c1\n\x00\x00ssl/c2\n"
		text, opened := runCrtList(t, h, content, cert, []string{"ssl/c1"}, []string{"ssl/c2"})
		t.Logf("haproxy %s opened ssl/c2: %v; it said: %s", h.branch, opened["ssl/c2"], bound(text, 1000))
		f := readCrtList(content)
		if len(f.lines) != 2 || !f.lines[1].undefined {
			t.Errorf("the reader does not mark the undefined line: %+v", f.lines)
		}
		if vs := (Policy{}).Check(crtListOutput(content)); !slices.Contains(rulesOf(vs), RuleNoNUL) {
			t.Errorf("not refused: %v", vs)
		}
	})
}

// FuzzReadCrtList: the reader never panics; every line it returns is a
// haproxy line (no '\n', no NUL, within the buffer, numbered upwards); on a
// file the policy does not refuse for its bytes (no NUL, no over-long line)
// it reads exactly the '\n'-separated lines a plain reader sees, so the
// policy's view cannot differ from haproxy's; and a crt-list the policy
// accepts names only paths inside the check's directory.
func FuzzReadCrtList(f *testing.F) {
	for _, c := range crtListCases() {
		if len(c.content) < 4096 {
			f.Add(c.content)
		}
	}
	f.Add("#\x00xx\n/etc/passwd\n")
	f.Add("\x00\n\r\n#\n  a [ca-file /x] b\n")
	f.Fuzz(func(t *testing.T, content string) {
		// Short inputs reach the buffer's limit through repetition.
		if strings.HasPrefix(content, "!") {
			content = strings.Repeat(content[1:], 1+crtListLineSize/max(1, len(content)))
		}
		got := readCrtList(content)
		last := 0
		for _, l := range got.lines {
			if l.number <= last || strings.ContainsAny(l.text, "\n\x00") || len(l.text) >= crtListLineSize-1 {
				t.Fatalf("malformed line %+v after %d", l, last)
			}
			last = l.number
		}
		clean := !strings.Contains(content, "\x00") && got.stop != crtListTooLong
		if clean {
			var plain []fileLine
			for i, text := range strings.SplitAfter(content, "\n") {
				if text == "" || text[0] == '#' || text[0] == '\n' || text[0] == '\r' {
					continue
				}
				plain = append(plain, fileLine{number: i + 1, text: strings.TrimSuffix(text, "\n")})
			}
			if !reflect.DeepEqual(got.lines, plain) || got.stop != crtListRead {
				t.Fatalf("reads %+v (stop %d), a plain reader %+v", got.lines, got.stop, plain)
			}
		}
		vs := Policy{}.Check(crtListOutput(content))
		if len(vs) == 0 {
			if !clean {
				t.Fatalf("a file with a NUL or an over-long line is accepted")
			}
			for _, l := range got.lines {
				words := splitCrtListLine(l.text)
				for i, w := range words {
					// words[0] is the certificate, options start after it.
					names := i == 0 || (i >= 2 && crtListOptions[strings.ToLower(words[i-1])] != nil)
					if names && outsideReason(w) != "" {
						t.Fatalf("accepted %q naming %q", l.text, w)
					}
				}
			}
		}
	})
}
