// Command no-abi is a plain WASI program with none of the Berth exports: the
// host must refuse it and name what is missing.
package main

import "fmt"

func main() { fmt.Println("hello") }
