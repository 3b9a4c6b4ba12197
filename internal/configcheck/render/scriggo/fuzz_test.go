package scriggo

import (
	"strings"
	"testing"
)

// FuzzPrepare: the scanner never panics whatever the author writes, and
// without render_glob it changes bytes only in place, and only trim
// markers and the go keyword, so upstream's positions are the author's.
func FuzzPrepare(f *testing.F) {
	for _, seed := range []string{
		"a\n{%- if x -%}\n  {{- y -}}\n{%- end -%}\n",
		"{{ go M(1) }}{#- c {# d #} -#}",
		"{%%\n  // don't\n  var a = map[string]any{\"k\": `}}`}\n%%}",
		`{{ render_glob "s-*" inherit_context }}{{ render_glob "s-*" }}`,
		"{% raw %}{{ {% end raw %}",
		`{{ "\"}}" }}{{ '}' }}{% /* %} */ %}`,
		"{{-}}{%-%}{#-#}{{",
	} {
		f.Add(seed)
	}
	p := newPreparer(map[string]string{"s-a": "{{ render_glob \"s-*\" inherit_context }}", "s-b": "{%- x = 1 -%}"})
	f.Fuzz(func(t *testing.T, src string) {
		prep, err := p.prepare("haproxy.cfg", src)
		if err != nil || strings.Contains(src, "render_glob") {
			return
		}
		if len(prep.text) != len(src) {
			t.Fatalf("length %d, want %d", len(prep.text), len(src))
		}
		for i := range src {
			if prep.text[i] == src[i] {
				continue
			}
			if prep.text[i] != ' ' || (src[i] != '-' && src[i] != 'g' && src[i] != 'o') {
				t.Fatalf("byte %d changed from %q to %q", i, src[i], prep.text[i])
			}
		}
	})
}
