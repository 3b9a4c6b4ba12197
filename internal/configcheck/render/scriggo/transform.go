package scriggo

import (
	"fmt"
	"path"
	"strconv"

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
// markers cut the whitespace beside their tags, snippet paths get an
// extension, pipes become calls, variadic method calls and ordering
// comparisons go through helpers (see their comments). The first
// construct it cannot give haptic's meaning is returned as an error.
//
// Then the repairs learned from earlier builds are applied (repair.go),
// and every node is recorded in index, for the next error to be found.
func transform(tree *ast.Tree, preps map[string]*prepared, learned *repairs, index *nodeIndex) error {
	var refused error
	walk(tree, func(file string, node ast.Node) ast.Node {
		node = rewrite(file, node, preps, &refused)
		if learned != nil {
			node = learned.apply(file, node)
		}
		if index != nil {
			index.record(file, node)
		}
		return node
	})
	return refused
}

// rewrite is transform's rewriting of one node.
func rewrite(file string, node ast.Node, preps map[string]*prepared, refused *error) ast.Node {
	{
		switch n := node.(type) {
		case *ast.BinaryOperator:
			replaced, err := rewriteOperator(n)
			if err != nil && *refused == nil {
				*refused = fmt.Errorf("%s:%d:%d: %w", displayName(file), n.Line, n.Column, err)
			}
			return replaced
		case *ast.Call:
			return rerouteVariadicMethod(n)
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
	}
}

// rewriteOperator rewrites a pipe into a call and an ordering comparison
// into dyn_cmp.
func rewriteOperator(n *ast.BinaryOperator) (ast.Expression, error) {
	switch n.Op {
	case ast.OperatorBitOr:
		return rewritePipe(n)
	case ast.OperatorLess, ast.OperatorLessEqual, ast.OperatorGreater, ast.OperatorGreaterEqual:
		// Upstream's checker lets a typed operand be ordered against an
		// interface{} one and then compares them wrongly at run time (a
		// loop bound read from an object silently ran zero times), so
		// every ordering goes through dyn_cmp, which compares numbers as
		// numbers and anything else as text.
		call := ast.NewCall(n.Position, ast.NewIdentifier(n.Position, "dyn_cmp"),
			[]ast.Expression{ast.NewBasicLiteral(n.Position, ast.StringLiteral, strconv.Quote(n.Op.String())), n.Expr1, n.Expr2}, false)
		call.SetParenthesis(n.Parenthesis())
		return call, nil
	}
	return n, nil
}

// rewritePipe turns x | f(a) into f(x, a) and x | f into f(x) when f is a
// function templates can call; anything else is a bitwise or. Walking
// children first, x | f | g becomes g(f(x)).
//
// A filter binds tighter than any operator in haptic's templates (Jinja's
// rule), but upstream parses | as Go's or, at the precedence of +: so
// a + b | f is (a + b) | f upstream and a + f(b) in Jinja. Rather than
// guess, an unparenthesized operator on the pipe's left is refused.
func rewritePipe(n *ast.BinaryOperator) (ast.Expression, error) {
	var fn ast.Expression
	var args []ast.Expression
	switch f := n.Expr2.(type) {
	case *ast.Identifier:
		if !pipeable(f.Name) || f.Parenthesis() > 0 {
			return n, nil
		}
		fn = f
	case *ast.Call:
		ident, ok := f.Func.(*ast.Identifier)
		if !ok || !pipeable(ident.Name) || f.Parenthesis() > 0 {
			return n, nil
		}
		fn, args = ident, f.Args
	default:
		return n, nil
	}
	subject := n.Expr1
	var negate *ast.UnaryOperator
	switch left := subject.(type) {
	case *ast.BinaryOperator:
		if left.Parenthesis() == 0 && left.Op != ast.OperatorBitOr {
			return n, fmt.Errorf("a pipe after the operator %s (in %s) is read differently by haptic's engine and by Scriggo: put the pipe's subject in parentheses", left.Op, n)
		}
	case *ast.UnaryOperator:
		if left.Parenthesis() == 0 && (left.Op == ast.OperatorNot || left.Op == ast.OperatorExtendedNot) {
			// !x | f is !(f(x)), the filter binding tighter.
			negate, subject = left, left.Expr
		} else if left.Parenthesis() == 0 {
			return n, fmt.Errorf("a pipe after the operator %s (in %s) is read differently by haptic's engine and by Scriggo: put the pipe's subject in parentheses", left.Op, n)
		}
	}
	call := ast.NewCall(n.Position, fn, append([]ast.Expression{subject}, args...), false)
	if negate != nil {
		negated := ast.NewUnaryOperator(negate.Position, negate.Op, call)
		negated.SetParenthesis(n.Parenthesis())
		return negated, nil
	}
	call.SetParenthesis(n.Parenthesis())
	return call, nil
}

// pipeable reports whether name is a function a pipe can end in.
func pipeable(name string) bool {
	if _, ok := functions[name]; ok {
		return true
	}
	switch name {
	case "len", "string", "int", "int64", "float64", "bool", "fail":
		return true
	}
	return false
}

// variadicMethods are the methods haptic's globals have that take a
// variable number of arguments.
var variadicMethods = map[string]bool{"Fetch": true, "GetSingle": true, "GetPath": true, "Register": true}

// rerouteVariadicMethod turns x.Fetch(a, b) into dyn_m_Fetch(x, a, b).
// Upstream miscompiles variadic calls of native methods: a concrete
// receiver's method receives one argument too many (a trailing nil), an
// interface's none at all. Native variadic functions are called right.
func rerouteVariadicMethod(n *ast.Call) ast.Expression {
	selector, ok := n.Func.(*ast.Selector)
	if !ok || !variadicMethods[selector.Ident] {
		return n
	}
	helper := "dyn_m_" + selector.Ident
	if receiver, ok := selector.Expr.(*ast.Identifier); ok && receiver.Name == "http" && selector.Ident == "Fetch" {
		// haptic's http.Fetch(url, …) shares the stores' method name but
		// returns the content, or an error that stops the rendering.
		helper = "dyn_http_Fetch"
	}
	call := ast.NewCall(n.Position, ast.NewIdentifier(selector.Position, helper),
		append([]ast.Expression{selector.Expr}, n.Args...), n.IsVariadic)
	call.SetParenthesis(n.Parenthesis())
	return call
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
