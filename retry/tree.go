package retry

import (
	"slices"
	"strings"
)

// ClassTree is the error class tree a module declares (its description's classes, each with its parent),
// the authority on a declared class's ancestors. It is immutable and safe for concurrent use. A nil
// *ClassTree stands for "no tree known": [ClassTree.Resolve] then takes a chain as sent.
//
// The tree is validated where it is declared (the module's description, at upload); a malformed one
// (a cycle, an unknown parent) is still walked safely here: a walk stops at a class it has seen and at a
// parent nobody declared.
type ClassTree struct {
	parents map[string]string
}

// NewClassTree returns the tree of the declared classes, given as class name → parent name ("" for a class
// directly under the root). The map is copied. An empty map is a module that declares no class: every
// class a result names is undeclared, unless reserved.
func NewClassTree(parents map[string]string) *ClassTree {
	t := &ClassTree{parents: make(map[string]string, len(parents))}
	for name, parent := range parents {
		t.parents[name] = parent
	}
	return t
}

// Declared reports whether the module declares the class.
func (t *ClassTree) Declared(name string) bool {
	if t == nil {
		return false
	}
	_, ok := t.parents[name]
	return ok
}

// Resolve turns the class chain a failure was sent with (nearest first) into the chain it is classified
// by, the nearest class in the hierarchy first, and reports the names in it that the module does not
// declare (reserved names left out), in the order they appear.
//
// The declared tree wins: the sent chain is walked nearest first, and each class the module does not
// declare is taken as sent, a hint of where it sits; at the first declared class the rest of the sent
// chain is dropped, and that class's ancestors are taken from the tree. So a chain sent as ["FatalLeaf"]
// is classified as ["FatalLeaf", "Fatal"] when the module declares FatalLeaf under Fatal, and one sent as
// ["Odd", "FatalLeaf", "Wrong"] as ["Odd", "FatalLeaf", "Fatal"] with Odd undeclared.
//
// A nil tree returns a copy of the chain as sent and no undeclared names. A name is never repeated.
func (t *ClassTree) Resolve(sent []string) (chain, undeclared []string) {
	if t == nil {
		return slices.Clone(sent), nil
	}
	seen := make(map[string]bool, len(sent)+4)
	add := func(c string) bool {
		if seen[c] {
			return false
		}
		seen[c] = true
		chain = append(chain, c)
		return true
	}
	for _, c := range sent {
		if _, ok := t.parents[c]; ok {
			for p, ok := c, true; ok && p != "" && add(p); {
				p, ok = t.parents[p]
			}
			return chain, undeclared
		}
		if add(c) && !strings.HasPrefix(c, ReservedPrefix) {
			undeclared = append(undeclared, c)
		}
	}
	return chain, undeclared
}
