package render

import (
	"fmt"
	"strconv"
	"strings"
	"text/template/parse"
)

// Compile rewrites every parse tree once, as html/template does, so that
// what follows holds whatever a template says:
//
//   - every printing action ({{ pipeline }}, not {{ $x := pipeline }}) ends
//     in escapeFunc (escapePrinted), unless its pipeline ends in trusted or
//     prints a rendered snippet (printsRenderedSnippet);
//   - every range charges what it ranges over, times the weight of its body
//     (inclusions.go), to the rendering's budget before it starts
//     (rangeCheckFunc), and checks the context, so a cancelled rendering
//     also stops in loops that write nothing;
//   - every recursive template enters and leaves (enterTemplateFunc,
//     leaveTemplateFunc) when executed, which bounds the nesting of
//     {{ template }} and charges the inclusion.
//
// The guards are actions declaring guardVariable, so they print nothing.
// Rewriting the tree is exact where filtering the output cannot be: the
// escaping step sees each printed value alone, not the text around it.

const (
	escapeFunc           = "_gatehouseEscape"
	emptyWhenMissingFunc = "_gatehouseEmptyWhenMissing"
	enterTemplateFunc    = "_gatehouseEnterTemplate"
	leaveTemplateFunc    = "_gatehouseLeaveTemplate"
	rangeCheckFunc       = "_gatehouseRangeCheck"
	// reservedPrefix starts the inserted functions' names; a template
	// calling one (to leave a template it never left, say) is refused.
	reservedPrefix = "_gatehouse"
	guardVariable  = "$_gatehouse"
	// trustedFunc is the per-action opt-out of the escaping step.
	trustedFunc = "trusted"
)

// layoutFuncs may follow render or renderGlob in a printing action without
// the rendered text being escaped again. That text is already made of
// escaped pieces (the snippet's own actions) and of the snippet's literal
// text, and these functions can only add what the template fixes (spaces
// and a newline, an int of them) or remove text at its ends: they cannot
// bring data into it.
var layoutFuncs = map[string]bool{
	"indent":     true,
	"nindent":    true,
	"trim":       true,
	"trimPrefix": true,
	"trimSuffix": true,
}

// checkFunctionNames refuses, with the position, a call of a reserved
// function and a trusted anywhere but at the end of a printing action. A
// trusted elsewhere ({{ $x := .v | trusted }}) would mark nothing, since
// the marker is a property of the action, and its author would believe
// otherwise.
func checkFunctionNames(tree *parse.Tree) error {
	markers := make(map[*parse.IdentifierNode]bool)
	var err error
	visitNodes(tree.Root, func(node parse.Node) {
		if err != nil {
			return
		}
		switch n := node.(type) {
		case *parse.ActionNode:
			if len(n.Pipe.Decl) == 0 {
				if id := calledFunction(n.Pipe.Cmds[len(n.Pipe.Cmds)-1]); id != nil && id.Ident == trustedFunc {
					markers[id] = true
				}
			}
		case *parse.IdentifierNode:
			location, _ := tree.ErrorContext(n)
			switch {
			case strings.HasPrefix(n.Ident, reservedPrefix):
				err = fmt.Errorf("%s: function %q is reserved for Gatehouse", location, n.Ident)
			case n.Ident == trustedFunc && !markers[n]:
				err = fmt.Errorf("%s: trusted may only end a printing action, as in {{ .value | trusted }}; "+
					"it marks that action's output as trusted and cannot be stored or passed on", location)
			}
		}
	})
	return err
}

// visitNodes calls visit on every node under node, pipelines and their
// arguments included.
func visitNodes(node parse.Node, visit func(parse.Node)) {
	switch n := node.(type) {
	case *parse.ListNode:
		if n != nil {
			for _, child := range n.Nodes {
				visitNodes(child, visit)
			}
		}
		return
	case *parse.PipeNode:
		if n != nil {
			for _, command := range n.Cmds {
				visitNodes(command, visit)
			}
		}
		return
	}
	visit(node)
	switch n := node.(type) {
	case *parse.ActionNode:
		visitNodes(n.Pipe, visit)
	case *parse.CommandNode:
		for _, arg := range n.Args {
			visitNodes(arg, visit)
		}
	case *parse.ChainNode:
		visitNodes(n.Node, visit)
	case *parse.IfNode:
		visitBranch(&n.BranchNode, visit)
	case *parse.RangeNode:
		visitBranch(&n.BranchNode, visit)
	case *parse.WithNode:
		visitBranch(&n.BranchNode, visit)
	case *parse.TemplateNode:
		visitNodes(n.Pipe, visit)
	}
}

func visitBranch(branch *parse.BranchNode, visit func(parse.Node)) {
	visitNodes(branch.Pipe, visit)
	visitNodes(branch.List, visit)
	visitNodes(branch.ElseList, visit)
}

// hardenTree applies the rewrite described at the top of this file to the
// template name; without escape, printing actions end in emptyWhenMissing
// instead (for the benchmark measuring the escaping step).
func hardenTree(name string, tree *parse.Tree, escape bool, in *inclusions) {
	hardenList(tree.Root, escape, in)
	if !in.recursive[name] {
		return
	}
	pos := tree.Root.Pos
	nodes := make([]parse.Node, 0, len(tree.Root.Nodes)+2)
	nodes = append(nodes, guardAction(enterTemplateFunc, pos, saturatingAdd(1, in.listWeight(tree.Root))))
	nodes = append(nodes, tree.Root.Nodes...)
	nodes = append(nodes, guardAction(leaveTemplateFunc, pos))
	tree.Root.Nodes = nodes
}

func hardenList(list *parse.ListNode, escape bool, in *inclusions) {
	if list == nil {
		return
	}
	for _, node := range list.Nodes {
		switch n := node.(type) {
		case *parse.ActionNode:
			finishPrintingAction(n, escape)
		case *parse.IfNode:
			hardenList(n.List, escape, in)
			hardenList(n.ElseList, escape, in)
		case *parse.WithNode:
			hardenList(n.List, escape, in)
			hardenList(n.ElseList, escape, in)
		case *parse.RangeNode:
			n.Pipe.Cmds = append(n.Pipe.Cmds, callCommand(rangeCheckFunc, n.Pos, in.rangeItemWeight(n)))
			hardenList(n.List, escape, in)
			hardenList(n.ElseList, escape, in)
		}
	}
}

func finishPrintingAction(action *parse.ActionNode, escape bool) {
	commands := action.Pipe.Cmds
	if len(action.Pipe.Decl) > 0 || isCall(commands[len(commands)-1], trustedFunc) || printsRenderedSnippet(commands) {
		return
	}
	step := escapeFunc
	if !escape {
		step = emptyWhenMissingFunc
	}
	action.Pipe.Cmds = append(commands, callCommand(step, action.Pos))
}

// printsRenderedSnippet reports whether a pipeline starts with a call of
// render or renderGlob, followed only by layoutFuncs.
func printsRenderedSnippet(commands []*parse.CommandNode) bool {
	if !isCall(commands[0], "render") && !isCall(commands[0], "renderGlob") {
		return false
	}
	for _, command := range commands[1:] {
		if id := calledFunction(command); id == nil || !layoutFuncs[id.Ident] {
			return false
		}
	}
	return true
}

func calledFunction(command *parse.CommandNode) *parse.IdentifierNode {
	if len(command.Args) == 0 {
		return nil
	}
	id, _ := command.Args[0].(*parse.IdentifierNode)
	return id
}

func isCall(command *parse.CommandNode, function string) bool {
	id := calledFunction(command)
	return id != nil && id.Ident == function
}

// callCommand is a call of function with integer constants as arguments
// (and the pipeline's value last, if any).
func callCommand(function string, pos parse.Pos, args ...int64) *parse.CommandNode {
	command := &parse.CommandNode{
		NodeType: parse.NodeCommand,
		Pos:      pos,
		Args:     []parse.Node{parse.NewIdentifier(function).SetPos(pos)},
	}
	for _, arg := range args {
		command.Args = append(command.Args, &parse.NumberNode{
			NodeType: parse.NodeNumber, Pos: pos, IsInt: true, Int64: arg, Text: strconv.FormatInt(arg, 10),
		})
	}
	return command
}

// guardAction is {{ $_gatehouse := function args... }}: it calls function
// and prints nothing.
func guardAction(function string, pos parse.Pos, args ...int64) *parse.ActionNode {
	return &parse.ActionNode{
		NodeType: parse.NodeAction,
		Pos:      pos,
		Pipe: &parse.PipeNode{
			NodeType: parse.NodePipe,
			Pos:      pos,
			Decl:     []*parse.VariableNode{{NodeType: parse.NodeVariable, Pos: pos, Ident: []string{guardVariable}}},
			Cmds:     []*parse.CommandNode{callCommand(function, pos, args...)},
		},
	}
}
