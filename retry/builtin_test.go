package retry

import (
	"slices"
	"strings"
	"testing"
)

// The list is well formed: reserved, unique names; parents that are builtins; a treatment for each.
func TestBuiltinsWellFormed(t *testing.T) {
	list := Builtins()
	if len(list) == 0 {
		t.Fatal("no builtin classes")
	}
	seen := map[string]bool{}
	for _, b := range list {
		if !strings.HasPrefix(b.Name, ReservedPrefix) || len(b.Name) == len(ReservedPrefix) {
			t.Errorf("%q does not start with %q and a name", b.Name, ReservedPrefix)
		}
		if seen[b.Name] {
			t.Errorf("%s is listed twice", b.Name)
		}
		seen[b.Name] = true
		if b.Meaning == "" || strings.Contains(b.Meaning, "|") || strings.Contains(b.Meaning, "\n") {
			t.Errorf("%s: meaning %q must be one line of table text", b.Name, b.Meaning)
		}
		if !slices.Contains([]string{GivenByHost, GivenBySDK, GivenByGateway, GivenByStore}, b.GivenBy) {
			t.Errorf("%s: given by %q", b.Name, b.GivenBy)
		}
		if b.Uncounted && b.Name != ClassCanceled {
			t.Errorf("%s is uncounted: only %s is", b.Name, ClassCanceled)
		}
	}
	for _, b := range list {
		if b.Parent != "" && !seen[b.Parent] {
			t.Errorf("%s: parent %q is not a builtin class", b.Name, b.Parent)
		}
	}
	if !seen[ClassCanceled] {
		t.Errorf("%s is not listed", ClassCanceled)
	}
	list[0].Name = "changed"
	if Builtins()[0].Name == "changed" {
		t.Error("Builtins returns a shared slice")
	}
}

// Each builtin's listed default is what Classify makes of a failure of that class, sent as the host or the
// SDK sends it (its chain, reported as listed), when no handler list or classifier rule names it; and a
// reported class keeps its treatment against a classifier rule, which an unreported one does not.
func TestBuiltinsDefaultIsClassify(t *testing.T) {
	parents := map[string]string{}
	for _, b := range Builtins() {
		parents[b.Name] = b.Parent
	}
	for _, b := range Builtins() {
		if b.Uncounted {
			if !IsCanceled(&Failure{Classes: []string{b.Name}}) {
				t.Errorf("%s is uncounted but IsCanceled does not take it", b.Name)
			}
			continue
		}
		var chain []string
		for c := b.Name; c != ""; c = parents[c] {
			chain = append(chain, c)
		}
		f := &Failure{Classes: chain, Reported: b.Reported}
		if d := Classify(f, nil, nil); d.Class != b.Default {
			t.Errorf("%s (chain %v, reported %d): Classify says %s (%s), the list says %s", b.Name, chain, b.Reported, d.Class, d.Reason, b.Default)
		}
		other := Unrecoverable
		if b.Default == Unrecoverable {
			other = Recoverable
		}
		app, err := NewClassifier([]Rule{{Class: b.Name, As: other.String()}})
		if err != nil {
			t.Fatal(err)
		}
		want := other
		if b.Reported != ReportedUnspecified {
			want = b.Default
		}
		if d := Classify(f, nil, app); d.Class != want {
			t.Errorf("%s with a classifier rule %s: Classify says %s (%s), want %s", b.Name, other, d.Class, d.Reason, want)
		}
		if d := Classify(f, &Policy{Unrecoverable: []string{b.Name}}, app); d.Class != Unrecoverable {
			t.Errorf("%s in the handler's unrecoverable list: Classify says %s", b.Name, d.Class)
		}
	}
}

func TestBuiltinTreatment(t *testing.T) {
	for _, tt := range []struct {
		b    Builtin
		want string
	}{
		{Builtin{Default: Recoverable}, "recoverable"},
		{Builtin{Default: Systemic}, "systemic"},
		{Builtin{Default: Backpressure, Reported: ReportedBackpressure}, "backpressure (reported)"},
		{Builtin{Uncounted: true}, "not counted"},
	} {
		if got := tt.b.Treatment(); got != tt.want {
			t.Errorf("%+v.Treatment() = %q, want %q", tt.b, got, tt.want)
		}
	}
}
