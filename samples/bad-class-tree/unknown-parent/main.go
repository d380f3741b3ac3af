// Command unknown-parent describes FatalLeaf under Fatal without declaring
// Fatal: the host must refuse it at upload, naming the class.
package main

import (
	"github.com/berthhq/berth/samples/bad-class-tree/rawguest"
	"github.com/berthhq/berth/wasm/abi"
)

func init() {
	rawguest.Classes = []abi.ErrorClass{{Name: "FatalLeaf", Parent: "Fatal"}}
}

func main() {}
