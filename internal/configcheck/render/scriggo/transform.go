package scriggo

import (
	"path"

	"github.com/open2b/scriggo/ast"
)

// snippetExtension is given to the paths of imported and rendered
// snippets, which haptic names without one. Upstream's emitter takes an
// import of a path without an extension for a Go package import and
// emits nothing for it, so its macros are never initialised ("none of
// the previous conditions matched identifier"); the parser has already
// read the file by then, so only the node's path changes.
const snippetExtension = ".tmpl"

// transform gives haptic's meaning to the tree upstream parsed: trim
// markers cut the whitespace beside their tags, and snippet paths get an
// extension.
func transform(tree *ast.Tree, preps map[string]*prepared) error {
	walk(tree, func(file string, node ast.Node) ast.Node {
		switch n := node.(type) {
		case *ast.Text:
			applyTrims(n, preps[file])
		case *ast.Import:
			if path.Ext(n.Path) == "" {
				n.Path += snippetExtension
			}
		case *ast.Render:
			if path.Ext(n.Path) == "" {
				n.Path += snippetExtension
			}
		}
		return node
	})
	return nil
}

// applyTrims cuts a text's leading whitespace when the tag before it ends
// with a trim marker (-%}) and its trailing whitespace when the tag after
// it starts with one ({%-), as Jinja does, on top of what upstream already
// cuts (a line holding only a statement).
func applyTrims(text *ast.Text, prep *prepared) {
	if prep == nil || text.Position == nil {
		return
	}
	if prep.trimRight[text.Start] {
		text.Cut.Left = max(text.Cut.Left, leadingSpace(text.Text))
	}
	if prep.trimLeft[text.End+1] {
		text.Cut.Right = max(text.Cut.Right, trailingSpace(text.Text))
	}
	if text.Cut.Left+text.Cut.Right > len(text.Text) {
		text.Cut.Right = len(text.Text) - text.Cut.Left
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func leadingSpace(b []byte) int {
	n := 0
	for n < len(b) && isSpace(b[n]) {
		n++
	}
	return n
}

func trailingSpace(b []byte) int {
	n := 0
	for n < len(b) && isSpace(b[len(b)-1-n]) {
		n++
	}
	return n
}
