// Command class-tree is a reactor that declares an error class tree and
// fails as each event tells it to, so that the host's classification by the
// declared tree can be tested through the binary.
//
// It declares Fatal, unrecoverable, and FatalLeaf under Fatal. A Fail event
// {"class": "FatalLeaf"} fails with a chain naming only FatalLeaf, as a
// guest outside the Go SDK might send it: the host must still take it for a
// Fatal, by the declared tree, and park it at once. A class the module does
// not declare ("Stranger") is classified by the chain as sent. "badUTF8":
// "class" or "message" appends an invalid byte to that field of the result,
// which the host must refuse as an invalid result.
package main

import (
	"time"

	"github.com/berthhq/berth/guest-sdk/berth"
)

var (
	// Fatal is a failure no retry fixes.
	Fatal = berth.NewErrorClass("Fatal", nil)
	// FatalLeaf is a kind of Fatal.
	FatalLeaf = berth.NewErrorClass("FatalLeaf", Fatal)
)

// failure is the payload of a Fail event.
type failure struct {
	Class   string `json:"class"`
	Message string `json:"message"`
	BadUTF8 string `json:"badUTF8"` // "class" or "message"
}

func onFail(c *berth.Context) error {
	var f failure
	if err := c.Event.Decode(&f); err != nil {
		return err
	}
	switch f.BadUTF8 {
	case "class":
		f.Class += "\xff"
	case "message":
		f.Message += "\xfe\xff"
	}
	// A class of this name alone, with no parent: the chain sent is [class].
	return berth.NewErrorClass(f.Class, nil).New(f.Message)
}

func init() {
	p := &berth.Processor{
		Name:   "ClassTree",
		Kind:   berth.Reactor,
		Errors: []*berth.ErrorClass{FatalLeaf},
		Retry: berth.Retry{
			MaxAttempts:    3,
			InitialBackoff: 20 * time.Millisecond,
			MaxBackoff:     50 * time.Millisecond,
			Unrecoverable:  []*berth.ErrorClass{Fatal},
		},
	}
	berth.Register(p.On("onFail", "Fail", onFail))
}

func main() {}
