package api

import (
	"fmt"
	"slices"
	"strings"

	"github.com/berthhq/berth/internal/suggest"
	"github.com/berthhq/berth/retry"
)

// nearestClasses is how many declared classes an unknown class's problem
// names.
const nearestClasses = 3

// knownClass reports whether class is one a failure may carry on this
// host: declared or named by a deployed module, builtin ("berth.*"), or
// given a treatment by a classifier rule. Without a registry (a host part
// tested alone) every class is known.
func (s *Server) knownClass(class string) bool {
	if s.deps.Modules == nil {
		return true
	}
	return slices.Contains(s.declaredClasses(), class) || slices.ContainsFunc(retry.Builtins(), func(b retry.Builtin) bool { return b.Name == class })
}

// declaredClasses are the classes the deployed modules name and the
// classifier's rules name, sorted.
func (s *Server) declaredClasses() []string {
	classes := s.deps.Modules.Classes()
	for _, r := range s.deps.Config().ClassifierConfig.Rules {
		classes = append(classes, r.Class)
	}
	slices.Sort(classes)
	return slices.Compact(classes)
}

// unknownClass says why a search or a job filter by a class no deployed
// module declares and no builtin class is, which matched nothing, is
// refused (a 400): a typo would otherwise read as "nothing parked". It
// names the nearest declared classes (builtin ones too when the name
// starts "berth.").
func (s *Server) unknownClass(class string) string {
	candidates := s.declaredClasses()
	if strings.HasPrefix(class, retry.ReservedPrefix) {
		for _, b := range retry.Builtins() {
			candidates = append(candidates, b.Name)
		}
	}
	detail := fmt.Sprintf("unknown class %q: no deployed module declares it, no classifier rule names it and it is no builtin class", class)
	switch near := nearest(class, candidates); {
	case len(near) > 0:
		detail += fmt.Sprintf("; nearest declared: %s", quoteAll(near))
	case len(candidates) == 0:
		detail += "; the deployed modules declare none"
	}
	return detail
}

// nearest returns up to nearestClasses candidates: first those that hold
// class (any case: "Unknown" names "UnknownBuyer"), then the closest by
// spelling.
func nearest(class string, candidates []string) []string {
	var out []string
	for _, c := range candidates {
		if len(out) < nearestClasses && strings.Contains(strings.ToLower(c), strings.ToLower(class)) {
			out = append(out, c)
		}
	}
	for _, c := range suggest.Nearest(class, candidates, nearestClasses) {
		if len(out) < nearestClasses && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
