// Command cycle describes a class tree with a loop (A under B, B under A):
// the host must refuse it at upload, naming the loop.
package main

import (
	"github.com/berthhq/berth/samples/bad-class-tree/rawguest"
	"github.com/berthhq/berth/wasm/abi"
)

func init() {
	rawguest.Classes = []abi.ErrorClass{{Name: "Top"}, {Name: "A", Parent: "B"}, {Name: "B", Parent: "A"}}
}

func main() {}
