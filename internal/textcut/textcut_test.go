package textcut

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestBound(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		mark string
		want string
	}{
		{"short", 10, "…", "short"},
		{"exactly", 7, "…", "exactly"},
		{"abcdefgh", 7, "...", "abcd..."},
		{"abcdefgh", 2, "...", ".."},
		{"abcdefgh", 0, "...", ""},
		// "é" is two bytes: a cut between them moves back before it.
		{"aébcdef", 4, "..", "a.."},
		{"aébcdef", 5, "..", "aé.."},
		{"aébcdef", 6, "..", "aéb.."},
		{"日本語テキスト", 10, "…", "日本…"},
	} {
		got := Bound(tc.s, tc.n, tc.mark)
		if got != tc.want {
			t.Errorf("Bound(%q, %d, %q) = %q, want %q", tc.s, tc.n, tc.mark, got, tc.want)
		}
		if len(got) > tc.n || !utf8.ValidString(got) {
			t.Errorf("Bound(%q, %d, %q) = %q: %d bytes, valid UTF-8 %v", tc.s, tc.n, tc.mark, got, len(got), utf8.ValidString(got))
		}
	}
}

func FuzzBound(f *testing.F) {
	f.Add("日本語テキスト", 10, "…")
	f.Add("abc", 1, "...")
	f.Fuzz(func(t *testing.T, s string, n int, mark string) {
		if !utf8.ValidString(s) || !utf8.ValidString(mark) {
			return
		}
		got := Bound(s, n, mark)
		if !utf8.ValidString(got) {
			t.Fatalf("Bound(%q, %d, %q) = %q: not valid UTF-8", s, n, mark, got)
		}
		if len(s) <= n && got != s {
			t.Fatalf("Bound(%q, %d, %q) = %q: changed text that fits", s, n, mark, got)
		}
		if len(s) <= n {
			return
		}
		if len(got) > max(n, 0) {
			t.Fatalf("Bound(%q, %d, %q) = %q: longer than %d", s, n, mark, got, n)
		}
		if n > len(mark) && (!strings.HasSuffix(got, mark) || !strings.HasPrefix(s, strings.TrimSuffix(got, mark))) {
			t.Fatalf("Bound(%q, %d, %q) = %q: not a prefix of the text and the mark", s, n, mark, got)
		}
	})
}
