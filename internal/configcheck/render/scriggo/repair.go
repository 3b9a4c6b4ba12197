package scriggo

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	sg "github.com/open2b/scriggo"
	"github.com/open2b/scriggo/ast"
)

// Repairs give haptic's loose typing to upstream's strict checker.
//
// haptic's templates read unstructured objects: dig returns interface{},
// and the templates then index it, range over it, add to it and assign
// it to typed variables, which haptic's fork allows and upstream's
// checker refuses. Rather than patch the checker, a build that fails with
// such an error is repaired: the node the error points at is rewritten
// into a call of a dyn_ helper that does at run time what the fork does
// (dyn.go), and the template is built again. Each checker error carries
// the file and byte span of its node, and the scanner keeps the author's
// offsets, so a repair finds its node again on every later build.
//
// A build stops at its first error, so a template needs as many builds
// as repairs; maxRepairs bounds the work an author's config can ask for.
// An error no rule repairs is returned as the compile error it is.

// maxRepairs bounds the repairs (and so the builds) of one config.
var maxRepairs = 2000

// traceRepair, when set (by tests), sees every repair learned.
var traceRepair func(at spanKey, rep repair, message string)

// spanKey names a node by its file and byte span.
type spanKey struct {
	file       string
	start, end int
}

// repairKind is what a repair does to its node.
type repairKind int

const (
	repairArith  repairKind = iota + 1 // a + b → dyn_arith("+", a, b)
	repairConcat                       // a + b → dyn_concat(a, b): one side is text
	repairIndex                        // x[k] → dyn_index(x, k); x[k] = v → dyn_set(x, k, v)
	repairNil                          // an undefined name → nil
)

type repair struct {
	// rewrite replaces the node (repairArith, repairConcat, repairIndex,
	// repairNil), or is zero.
	rewrite repairKind
	// wrap names the helper the node, rewritten or not, is passed to:
	// dyn_range or a dyn_as_ helper; empty for none. One node may need
	// both: route["filters"] assigned to a []any is indexed through
	// dyn_index and its result converted by dyn_as_slice.
	wrap string
}

// merge adds b's parts to r; a part b leaves zero is kept.
func (r repair) merge(b repair) repair {
	if b.rewrite != 0 {
		r.rewrite = b.rewrite
	}
	if b.wrap != "" {
		r.wrap = b.wrap
	}
	return r
}

// repairs are a config's repairs, learned over its builds and shared by
// its outputs (the snippets they render are the same files).
type repairs struct {
	byNode map[spanKey]repair
	count  int
}

func newRepairs() *repairs { return &repairs{byNode: map[spanKey]repair{}} }

// learnedRepair is one repair as CompileLearned passes it on.
type learnedRepair struct {
	File    string     `json:"f"`
	Start   int        `json:"s"`
	End     int        `json:"e"`
	Rewrite repairKind `json:"r,omitempty"`
	Wrap    string     `json:"w,omitempty"`
}

// encode is what CompileLearned returns: the repairs in a stable order.
func (r *repairs) encode() []byte {
	list := make([]learnedRepair, 0, len(r.byNode))
	for at, rep := range r.byNode {
		list = append(list, learnedRepair{File: at.file, Start: at.start, End: at.end, Rewrite: rep.rewrite, Wrap: rep.wrap})
	}
	slices.SortFunc(list, func(a, b learnedRepair) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Start, b.Start), cmp.Compare(a.End, b.End))
	})
	out, err := json.Marshal(list)
	if err != nil {
		panic(err) // plain strings and numbers
	}
	return out
}

// decodeRepairs reads what encode wrote. A value it cannot read, or one
// naming a helper that does not exist, counts as nothing learned: the
// compile then learns again, build by build, and still bounded.
func decodeRepairs(learned []byte) *repairs {
	r := newRepairs()
	if len(learned) == 0 {
		return r
	}
	var list []learnedRepair
	if err := json.Unmarshal(learned, &list); err != nil || len(list) > maxRepairs {
		return r
	}
	for _, l := range list {
		if l.Rewrite < 0 || l.Rewrite > repairNil || (l.Wrap != "" && l.Wrap != "dyn_range" && !isAsHelper(l.Wrap)) {
			return newRepairs()
		}
		r.byNode[spanKey{file: l.File, start: l.Start, end: l.End}] = repair{rewrite: l.Rewrite, wrap: l.Wrap}
	}
	r.count = len(r.byNode)
	return r
}

func isAsHelper(name string) bool {
	for _, helper := range asHelpers {
		if helper == name {
			return true
		}
	}
	return false
}

// asHelpers name the dyn_as_ helper converting an interface{} to each
// type a template declares a variable, parameter or result of.
var asHelpers = map[string]string{
	"map[string]interface {}":   "dyn_as_map",
	"[]interface {}":            "dyn_as_slice",
	"string":                    "dyn_as_string",
	"bool":                      "dyn_as_bool",
	"int":                       "dyn_as_int",
	"int64":                     "dyn_as_int64",
	"float64":                   "dyn_as_float",
	"[]string":                  "dyn_as_strings",
	"map[string]string":         "dyn_as_string_map",
	"[]map[string]interface {}": "dyn_as_map_slice",
}

var (
	// invalid operation: a + b (operator + not defined on interface)
	// invalid operation: a + b (mismatched types string and interface {})
	arithError = regexp.MustCompile(`^invalid operation: .* \((operator [-+*/%] not defined on interface|mismatched types (.+) and (.+))\)$`)
	// invalid operation: n + " x" (cannot convert " x" (type untyped string) to type int)
	convertError = regexp.MustCompile(`cannot convert .* \((type )?untyped string( constant)?\) to type`)
	indexError   = regexp.MustCompile(`\(type interface \{\} does not support indexing\)$`)
	rangeError   = regexp.MustCompile(`^cannot range over .* \(type interface \{\}\)$`)
	// cannot use x (type interface {}) as type T in assignment / argument
	// to f / return argument / map index
	useError       = regexp.MustCompile(`^cannot use (.+) \(type interface \{\}\) as type (.+) in (assignment|argument to .+|return argument|map index|field value|slice literal|map value)$`)
	undefinedError = regexp.MustCompile(`^undefined: ([A-Za-z_][A-Za-z0-9_]*)$`)
)

// nilTolerant are the functions an undefined name may be passed to, and
// then is nil: haptic's templates test names extraContext may not define
// this way (debug | fallback(false)).
var nilTolerant = map[string]bool{"fallback": true, "coalesce": true, "isNil": true, "dig": true}

// learn turns a build error into a repair, reporting whether it did.
func (r *repairs) learn(err error, nodes *nodeIndex) bool {
	var buildErr *sg.BuildError
	if !errors.As(err, &buildErr) || r.count >= maxRepairs {
		return false
	}
	pos := buildErr.Position()
	key := spanKey{file: normalizePath(buildErr.Path()), start: pos.Start, end: pos.End}
	message := buildErr.Message()
	add := func(at spanKey, rep repair) bool {
		existing := r.byNode[at]
		rep = existing.merge(rep)
		if rep == existing {
			return false // the repair did not take: no progress
		}
		r.byNode[at] = rep
		r.count++
		if traceRepair != nil {
			traceRepair(at, rep, message)
		}
		return true
	}
	switch {
	case arithError.MatchString(message) || convertError.MatchString(message):
		op, ok := nodes.binary(key)
		if !ok {
			return false
		}
		if op.Op == ast.OperatorAddition && (isText(op.Expr1) || isText(op.Expr2) || strings.Contains(message, "string")) {
			return add(key, repair{rewrite: repairConcat})
		}
		return add(key, repair{rewrite: repairArith})
	case indexError.MatchString(message):
		return add(key, repair{rewrite: repairIndex})
	case rangeError.MatchString(message):
		return add(key, repair{wrap: "dyn_range"})
	case useError.MatchString(message):
		m := useError.FindStringSubmatch(message)
		helper, ok := asHelpers[m[2]]
		if !ok {
			return false
		}
		at := key
		if !strings.HasPrefix(m[3], "assignment") {
			// The error points at the call, return or index holding the
			// value: find the value among its operands by its text.
			child, ok := nodes.operand(key, m[1])
			if !ok {
				return false
			}
			at = child
		}
		return add(at, repair{wrap: helper})
	case undefinedError.MatchString(message):
		name := undefinedError.FindStringSubmatch(message)[1]
		if !nodes.passedTo(key, name, nilTolerant) {
			return false
		}
		return add(key, repair{rewrite: repairNil})
	}
	return false
}

// isText reports whether e is a string literal.
func isText(e ast.Expression) bool {
	lit, ok := e.(*ast.BasicLiteral)
	return ok && lit.Type == ast.StringLiteral
}

// normalizePath is a tree's or an error's path as the walker names files.
func normalizePath(p string) string {
	p = strings.TrimPrefix(p, "/")
	return strings.TrimSuffix(p, snippetExtension)
}

// nodeIndex records, during a build's transformation, the nodes with
// their spans, for learn to find the error's node and the call it is an
// argument of. Every build but the last ends in an error, yet each needs
// only the nodes at one span: a list scanned then costs less than a map
// filled with every node of every build.
type nodeIndex struct {
	recorded []recordedNode
}

type recordedNode struct {
	at   spanKey
	node ast.Node
}

func newNodeIndex() *nodeIndex { return &nodeIndex{} }

func (ix *nodeIndex) record(file string, n ast.Node) {
	pos := n.Pos()
	if pos == nil {
		return
	}
	ix.recorded = append(ix.recorded, recordedNode{at: spanKey{file: file, start: pos.Start, end: pos.End}, node: n})
}

// at are the nodes at key.
func (ix *nodeIndex) at(key spanKey) []ast.Node {
	var nodes []ast.Node
	for _, r := range ix.recorded {
		if r.at.start == key.start && r.at.end == key.end && normalizePath(r.at.file) == key.file {
			nodes = append(nodes, r.node)
		}
	}
	return nodes
}

// callee is the name of the function n is an argument of, if any.
func (ix *nodeIndex) callee(n ast.Node) string {
	for _, r := range ix.recorded {
		call, ok := r.node.(*ast.Call)
		if !ok {
			continue
		}
		ident, ok := call.Func.(*ast.Identifier)
		if !ok {
			continue
		}
		for _, arg := range call.Args {
			if arg == n {
				return ident.Name
			}
		}
	}
	return ""
}

func (ix *nodeIndex) binary(key spanKey) (*ast.BinaryOperator, bool) {
	for _, n := range ix.at(key) {
		if op, ok := n.(*ast.BinaryOperator); ok {
			return op, true
		}
	}
	return nil, false
}

// operand finds, among the operands of the node at key (a call's
// arguments, a return's values, an index's key, a composite literal's
// elements), the one whose text is text.
func (ix *nodeIndex) operand(key spanKey, text string) (spanKey, bool) {
	for _, n := range ix.at(key) {
		var candidates []ast.Expression
		switch n := n.(type) {
		case *ast.Call:
			candidates = n.Args
		case *ast.Return:
			candidates = n.Values
		case *ast.Index:
			candidates = []ast.Expression{n.Index}
		case *ast.CompositeLiteral:
			for _, kv := range n.KeyValues {
				candidates = append(candidates, kv.Key, kv.Value)
			}
		case ast.Expression:
			candidates = []ast.Expression{n}
		}
		for _, c := range candidates {
			if c != nil && c.String() == text && c.Pos() != nil {
				return spanKey{file: key.file, start: c.Pos().Start, end: c.Pos().End}, true
			}
		}
	}
	return spanKey{}, false
}

// passedTo reports whether the node at key is the identifier name passed
// to one of the functions fns.
func (ix *nodeIndex) passedTo(key spanKey, name string, fns map[string]bool) bool {
	for _, n := range ix.at(key) {
		if ident, ok := n.(*ast.Identifier); ok && ident.Name == name && fns[ix.callee(n)] {
			return true
		}
	}
	return false
}

// apply rewrites n if a repair names it; file is n's file.
func (r *repairs) apply(file string, n ast.Node) ast.Node {
	pos := n.Pos()
	if pos == nil || len(r.byNode) == 0 {
		return n
	}
	if assignment, ok := n.(*ast.Assignment); ok {
		return setThroughHelper(assignment)
	}
	rep, ok := r.byNode[spanKey{file: normalizePath(file), start: pos.Start, end: pos.End}]
	if !ok {
		return n
	}
	call := func(name string, args ...ast.Expression) *ast.Call {
		return ast.NewCall(pos, ast.NewIdentifier(pos, name), args, false)
	}
	rewritten := n
	switch rep.rewrite {
	case repairArith, repairConcat:
		if op, ok := n.(*ast.BinaryOperator); ok {
			c := call("dyn_arith", ast.NewBasicLiteral(pos, ast.StringLiteral, strconv.Quote(op.Op.String())), op.Expr1, op.Expr2)
			if rep.rewrite == repairConcat {
				c = call("dyn_concat", op.Expr1, op.Expr2)
			}
			c.SetParenthesis(op.Parenthesis())
			rewritten = c
		}
	case repairIndex:
		if index, ok := n.(*ast.Index); ok {
			c := call("dyn_index", index.Expr, index.Index)
			c.SetParenthesis(index.Parenthesis())
			rewritten = c
		}
	case repairNil:
		if _, ok := n.(*ast.Identifier); ok {
			rewritten = ast.NewIdentifier(pos, "nil")
		}
	}
	if rep.wrap == "" {
		return rewritten
	}
	expr, ok := rewritten.(ast.Expression)
	if !ok {
		return rewritten
	}
	// The value keeps its parentheses inside the call.
	return call(rep.wrap, expr)
}

// setThroughHelper turns x[k] = v, whose target was repaired into
// dyn_index(x, k), into dyn_set(x, k, v).
func setThroughHelper(a *ast.Assignment) ast.Node {
	if a.Type != ast.AssignmentSimple || len(a.Lhs) != 1 || len(a.Rhs) != 1 {
		return a
	}
	target, ok := a.Lhs[0].(*ast.Call)
	if !ok {
		return a
	}
	if ident, ok := target.Func.(*ast.Identifier); !ok || ident.Name != "dyn_index" {
		return a
	}
	return ast.NewCall(a.Position, ast.NewIdentifier(a.Position, "dyn_set"), append(append([]ast.Expression{}, target.Args...), a.Rhs[0]), false)
}

// repairError is a build that stopped on an error no rule repairs.
func repairError(err error, r *repairs) error {
	if r.count >= maxRepairs {
		return fmt.Errorf("%w (after %d repairs of loosely typed expressions, the most a config may need)", err, r.count)
	}
	return err
}
