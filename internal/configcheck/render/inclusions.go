package render

import (
	"math"
	"text/template/parse"
)

// inclusions bounds {{ template }} inclusions without a guard call in every
// included template, which would cost two function calls per inclusion
// (about a tenth of the example's rendering time).
//
// The templates a template includes are named in its text, so the graph of
// inclusions is known at compile time. A template on a cycle of it
// (including itself, directly or not) is recursive: its depth and count are
// only known at run time, so it enters and leaves through guards that count
// the nesting (MaxTemplateDepth) and charge the budget. Any other template
// can only be included a number of times its text fixes, its weight:
// itself, plus the weights of what it includes outside ranges (both branches
// of an if counted). That weight is charged where it is decided: by the
// range including it, per item, or by whatever includes the template that
// includes it, up to execute. So a chain of templates each including the
// next twice, forty deep, is refused when its first template is rendered.
// Its depth is at most the number of templates, which the stack bears.
type inclusions struct {
	trees     map[string]*parse.Tree
	recursive map[string]bool
	weights   map[string]int64
}

func newInclusions(trees map[string]*parse.Tree) *inclusions {
	callees := make(map[string][]string)
	for name, tree := range trees {
		visitNodes(tree.Root, func(node parse.Node) {
			if n, ok := node.(*parse.TemplateNode); ok {
				callees[name] = append(callees[name], n.Name)
			}
		})
	}
	in := &inclusions{trees: trees, recursive: make(map[string]bool), weights: make(map[string]int64)}
	for name := range trees {
		in.recursive[name] = reaches(callees, callees[name], name)
	}
	return in
}

// reaches reports whether target is reachable from the templates from.
func reaches(callees map[string][]string, from []string, target string) bool {
	seen := make(map[string]bool)
	stack := append([]string(nil), from...)
	for len(stack) > 0 {
		name := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if name == target {
			return true
		}
		if !seen[name] {
			seen[name] = true
			stack = append(stack, callees[name]...)
		}
	}
	return false
}

// includedWeight is what including name charges its includer: its weight,
// or nothing for a recursive template, which charges itself on entry (and
// for a name no template has, which fails when executed).
func (in *inclusions) includedWeight(name string) int64 {
	if in.recursive[name] || in.trees[name] == nil {
		return 0
	}
	if weight, known := in.weights[name]; known {
		return weight
	}
	weight := saturatingAdd(1, in.listWeight(in.trees[name].Root))
	in.weights[name] = weight
	return weight
}

// listWeight is the weight of the templates list includes outside ranges
// (a range charges for its own body, per item).
func (in *inclusions) listWeight(list *parse.ListNode) int64 {
	if list == nil {
		return 0
	}
	var total int64
	for _, node := range list.Nodes {
		switch n := node.(type) {
		case *parse.TemplateNode:
			total = saturatingAdd(total, in.includedWeight(n.Name))
		case *parse.IfNode:
			total = saturatingAdd(total, saturatingAdd(in.listWeight(n.List), in.listWeight(n.ElseList)))
		case *parse.WithNode:
			total = saturatingAdd(total, saturatingAdd(in.listWeight(n.List), in.listWeight(n.ElseList)))
		case *parse.RangeNode:
			total = saturatingAdd(total, in.listWeight(n.ElseList))
		}
	}
	return total
}

// rangeItemWeight is what one item of a range charges: the iteration, and
// the templates its body includes outside nested ranges.
func (in *inclusions) rangeItemWeight(n *parse.RangeNode) int64 {
	return saturatingAdd(1, in.listWeight(n.List))
}

// executeWeight is what execute charges for running name as a file or a
// rendered snippet.
func (in *inclusions) executeWeight(name string) int64 {
	if in.recursive[name] {
		return 0
	}
	return in.includedWeight(name)
}

func saturatingAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func saturatingMul(a, b uint64) uint64 {
	if a != 0 && b > math.MaxUint64/a {
		return math.MaxUint64
	}
	return a * b
}
