package textcut

import "unicode/utf8"

// Prefix is the longest prefix of s of at most n bytes that ends on a
// character boundary ("" for n ≤ 0).
func Prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// Bound is s when it holds in n bytes, else a prefix of s followed by mark,
// n bytes at most in all. When n leaves no room for the mark, the mark
// alone is cut to n bytes.
func Bound(s string, n int, mark string) string {
	if len(s) <= n {
		return s
	}
	if n <= len(mark) {
		return Prefix(mark, n)
	}
	return Prefix(s, n-len(mark)) + mark
}
