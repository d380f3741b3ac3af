package retry

import (
	"slices"
	"testing"
)

func TestClassTreeResolve(t *testing.T) {
	tree := NewClassTree(map[string]string{
		"Fatal": "", "FatalLeaf": "Fatal", "Deeper": "FatalLeaf",
		"Notification": "", "UnknownBuyer": "Notification",
		ClassHostError: "", ClassConnectionRefused: ClassHostError,
	})
	tests := []struct {
		name             string
		tree             *ClassTree
		sent             []string
		chain, undeclare []string
	}{
		{"declared leaf alone gets its ancestors", tree, []string{"FatalLeaf"}, []string{"FatalLeaf", "Fatal"}, nil},
		{"deep leaf", tree, []string{"Deeper"}, []string{"Deeper", "FatalLeaf", "Fatal"}, nil},
		{"the tree wins over a wrong chain", tree, []string{"FatalLeaf", "Notification"}, []string{"FatalLeaf", "Fatal"}, nil},
		{"undeclared nearest class is a hint", tree, []string{"Odd", "FatalLeaf"}, []string{"Odd", "FatalLeaf", "Fatal"}, []string{"Odd"}},
		{"wholly undeclared chain as sent", tree, []string{"Odd", "Odder"}, []string{"Odd", "Odder"}, []string{"Odd", "Odder"}},
		{"reserved names are not undeclared", tree, []string{ClassTimeout}, []string{ClassTimeout}, nil},
		{"declared reserved names use the tree", tree, []string{ClassConnectionRefused}, []string{ClassConnectionRefused, ClassHostError}, nil},
		{"a name is not repeated", tree, []string{"Odd", "Odd", "Fatal", "Fatal"}, []string{"Odd", "Fatal"}, []string{"Odd"}},
		{"empty chain", tree, nil, nil, nil},
		{"empty tree: all undeclared", NewClassTree(nil), []string{"A", ClassPanic}, []string{"A", ClassPanic}, []string{"A"}},
		{"nil tree: as sent, nothing recorded", nil, []string{"A", "B"}, []string{"A", "B"}, nil},
		{"a cycle is walked once", NewClassTree(map[string]string{"A": "B", "B": "A"}), []string{"A"}, []string{"A", "B"}, nil},
		{"an unknown parent ends the walk", NewClassTree(map[string]string{"A": "Gone"}), []string{"A"}, []string{"A", "Gone"}, nil},
	}
	for _, tt := range tests {
		chain, undeclared := tt.tree.Resolve(tt.sent)
		if !slices.Equal(chain, tt.chain) || !slices.Equal(undeclared, tt.undeclare) {
			t.Errorf("%s: Resolve(%q) = %q, %q; want %q, %q", tt.name, tt.sent, chain, undeclared, tt.chain, tt.undeclare)
		}
	}
}

// The nearest class in the hierarchy wins, by the module's declared tree, whatever chain a result was
// sent with (docs/failure-model.md, section 2).
func TestClassifyByDeclaredTree(t *testing.T) {
	tree := NewClassTree(map[string]string{
		"Fatal": "", "FatalLeaf": "Fatal", "Retryable": "Fatal", "RetryableLeaf": "Retryable",
		"Busy": "",
	})
	pol := func(unrecoverable, recoverable []string) *Policy {
		p := Resolve(Layer{SourceHandler, Settings{Unrecoverable: unrecoverable, Recoverable: recoverable}})
		p.Classes = tree
		return &p
	}
	app, err := NewClassifier([]Rule{{"Busy", "backpressure"}, {"Fatal", "systemic"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		f          *Failure
		p          *Policy
		app        *Classifier
		want       Class
		reason     string
		undeclared []string
	}{
		{"leaf of an unrecoverable class, sent alone", &Failure{Classes: []string{"FatalLeaf"}},
			pol([]string{"Fatal"}, nil), nil, Unrecoverable, "handler unrecoverable: Fatal", nil},
		{"nearer recoverable class wins over its unrecoverable ancestor", &Failure{Classes: []string{"RetryableLeaf"}},
			pol([]string{"Fatal"}, []string{"Retryable"}), nil, Recoverable, "handler recoverable: Retryable", nil},
		{"nearer unrecoverable class wins over its recoverable ancestor", &Failure{Classes: []string{"RetryableLeaf"}},
			pol([]string{"RetryableLeaf"}, []string{"Fatal"}), nil, Unrecoverable, "handler unrecoverable: RetryableLeaf", nil},
		{"a chain sent wrongly does not reach a list the tree does not", &Failure{Classes: []string{"Busy", "Fatal"}},
			pol([]string{"Fatal"}, nil), nil, Recoverable, "default", nil},
		{"classifier rules read the tree too", &Failure{Classes: []string{"FatalLeaf"}},
			pol(nil, nil), app, Systemic, "classifier rule 2: Fatal", nil},
		{"an undeclared class is classified by the chain as sent", &Failure{Classes: []string{"Stranger", "Fatal"}},
			pol([]string{"Fatal"}, nil), nil, Unrecoverable, "handler unrecoverable: Fatal", []string{"Stranger"}},
		{"an undeclared class alone is recoverable", &Failure{Classes: []string{"Stranger"}},
			pol([]string{"Fatal"}, nil), nil, Recoverable, "default", []string{"Stranger"}},
		{"builtin names are known", &Failure{Classes: []string{ClassTimeout}},
			pol([]string{"Fatal"}, nil), nil, Recoverable, "builtin: " + ClassTimeout, nil},
		{"no tree: the chain as sent", &Failure{Classes: []string{"FatalLeaf"}},
			&Policy{Unrecoverable: []string{"Fatal"}}, nil, Recoverable, "default", nil},
	}
	for _, tt := range tests {
		d := Classify(tt.f, tt.p, tt.app)
		if d.Class != tt.want || d.Reason != tt.reason || !slices.Equal(d.Undeclared, tt.undeclared) {
			t.Errorf("%s: Classify(%q) = %v (%q, undeclared %q); want %v (%q, undeclared %q)",
				tt.name, tt.f.Classes, d.Class, d.Reason, d.Undeclared, tt.want, tt.reason, tt.undeclared)
		}
		if want, _ := tt.p.Classes.Resolve(tt.f.Classes); !slices.Equal(d.Chain, want) {
			t.Errorf("%s: Chain %q, want %q", tt.name, d.Chain, want)
		}
	}
}
