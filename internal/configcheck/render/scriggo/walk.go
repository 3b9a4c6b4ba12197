package scriggo

import (
	"reflect"
	"sync"

	"github.com/open2b/scriggo/ast"
)

var nodeType = reflect.TypeFor[ast.Node]()

// walk visits every node of tree, children first, with the path of the
// file it is in, and replaces a node by what visit returns for it where
// the field holding it can take the replacement. It descends into the trees of imports and renders, each
// tree once (the parser shares the tree of a file imported twice).
//
// It walks by reflection: a switch over ast's node types would have to be
// kept in step with every Scriggo release, and a node kind it missed
// would be a construct left untransformed rather than an error.
func walk(tree *ast.Tree, visit func(file string, node ast.Node) ast.Node) {
	w := walker{visit: visit, seen: map[uintptr]bool{}}
	w.value(reflect.ValueOf(tree))
}

type walker struct {
	visit func(string, ast.Node) ast.Node
	seen  map[uintptr]bool
	file  string
}

// value walks v's children and returns v's replacement, if any.
func (w *walker) value(v reflect.Value) (reflect.Value, bool) {
	switch v.Kind() {
	case reflect.Interface:
		if v.IsNil() {
			return v, false
		}
		return w.value(v.Elem())
	case reflect.Pointer:
		if v.IsNil() || v.Elem().Kind() != reflect.Struct {
			return v, false
		}
		if _, isPosition := v.Interface().(*ast.Position); isPosition {
			return v, false
		}
		if w.seen[v.Pointer()] {
			return v, false
		}
		w.seen[v.Pointer()] = true
		if tree, ok := v.Interface().(*ast.Tree); ok {
			outer := w.file
			w.file = tree.Path
			defer func() { w.file = outer }()
		}
		w.fields(v.Elem())
		if node, ok := v.Interface().(ast.Node); ok {
			if replaced := w.visit(w.file, node); replaced != nil && replaced != node {
				return reflect.ValueOf(replaced), true
			}
		}
	case reflect.Struct:
		w.fields(v)
	case reflect.Slice:
		for i := range v.Len() {
			if replaced, ok := w.value(v.Index(i)); ok && replaced.Type().AssignableTo(v.Index(i).Type()) {
				v.Index(i).Set(replaced)
			}
		}
	}
	return v, false
}

// walkableFields are, by struct type, the exported fields that may hold
// a node: a compile walks every tree once per build, so the question is
// answered once per type.
var walkableFields sync.Map // reflect.Type → []int

// mayHoldNodes says whether a value of type t can hold a node: not a
// text's bytes ([]byte), which the walk would otherwise visit one by one.
func mayHoldNodes(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Interface, reflect.Pointer, reflect.Struct:
		return true
	case reflect.Slice, reflect.Array:
		return mayHoldNodes(t.Elem())
	}
	return false
}

func fieldsOf(t reflect.Type) []int {
	if known, ok := walkableFields.Load(t); ok {
		return known.([]int)
	}
	var indexes []int
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if mayHoldNodes(f.Type) {
			indexes = append(indexes, i)
		}
	}
	walkableFields.Store(t, indexes)
	return indexes
}

func (w *walker) fields(v reflect.Value) {
	for _, i := range fieldsOf(v.Type()) {
		field := v.Field(i)
		if field.Kind() == reflect.Interface && !field.Type().Implements(nodeType) && field.Type() != nodeType {
			// An interface that holds no node (an any in an IR field).
			if field.IsNil() || !field.Elem().Type().Implements(nodeType) {
				continue
			}
		}
		if replaced, ok := w.value(field); ok && field.CanSet() && replaced.Type().AssignableTo(field.Type()) {
			field.Set(replaced)
		}
	}
}
