package config

import (
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// nested are configurations nested depth deep in each way TOML nests:
// arrays, inline tables, the steps of a dotted key, table headers, and
// arrays and tables within each other. Each sets the unknown key x.
func nested(depth int) map[string]string {
	return map[string]string{
		"arrays":        "x = " + strings.Repeat("[", depth) + strings.Repeat("]", depth) + "\n",
		"inline tables": "x = " + strings.Repeat("{a=", depth) + "1" + strings.Repeat("}", depth) + "\n",
		"dotted key":    "# a comment\n\nx" + strings.Repeat(".a", depth-1) + " = 1\n",
		"table header":  "[x" + strings.Repeat(".a", depth-1) + "]\nv = 1\n",
		"mixed":         "x = " + strings.Repeat("[{a=", depth/2) + "1" + strings.Repeat("}]", depth/2) + "\n",
	}
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	// TotalAlloc is the process's: a parallel test, or the runtime,
	// allocating meanwhile only adds to it, so the least of a few runs is
	// f's own.
	least := uint64(math.MaxUint64)
	for range 5 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	return least
}

// TestDeepConfigRefusedCheaply: a bad file must cost no more than parsing
// it. A configuration nested 8,000 deep (16 KiB; the TOML parser's work
// grows with the square of the depth for some of these) is refused before
// it is parsed, with one error naming its line and the limit, for a few
// times its size in allocations. One nested exactly maxNesting deep is not
// refused for its depth: it gets the unknown key x.
func TestDeepConfigRefusedCheaply(t *testing.T) {
	for name, text := range nested(8000) {
		t.Run(name, func(t *testing.T) {
			var err error
			bytes := allocated(func() { _, err = parse([]byte(text), "deep.toml", noEnv) })
			errs := Errors(err)
			wantLine := strings.Count(text[:strings.Index(text, "x")], "\n") + 1
			if len(errs) != 1 || errs[0].Line != wantLine || !strings.Contains(errs[0].Problem, "nested more than 32 deep") {
				t.Fatalf("Parse: %v; want one error at line %d saying it is nested more than 32 deep", err, wantLine)
			}
			if limit := uint64(8 * len(text)); bytes > limit {
				t.Errorf("refusing a %d-byte file allocated %d bytes, more than %d", len(text), bytes, limit)
			}
		})
	}
	for name, text := range nested(maxNesting) {
		_, err := parse([]byte(text), "edge.toml", noEnv)
		if errs := Errors(err); len(errs) != 1 || !errs[0].Unknown || !strings.HasPrefix(errs[0].Key, "x") {
			t.Errorf("%s nested %d deep: %v, want only the unknown key x", name, maxNesting, err)
		}
	}
}

// TestKeyLinesLinear: mapping keys to lines, whatever the depth, allocates
// no more than the TOML parser does on the same file, and twice the depth
// costs about twice as much, not four times (it was the square of the
// depth: gigabytes for 8,000 nested arrays).
func TestKeyLinesLinear(t *testing.T) {
	const depth = 8000
	text := nested(depth)["arrays"] // the one the parser reads in linear time
	var tree map[string]any
	parsing := allocated(func() { toml.Decode(text, &tree) })
	if mapping := allocated(func() { keyLines(text) }); mapping > parsing {
		t.Errorf("keyLines of %d nested arrays allocated %d bytes, more than the parser (%d)", depth, mapping, parsing)
	}
	deeper := nested(2 * depth)
	for name, text := range nested(depth) {
		once := allocated(func() { keyLines(text) })
		twice := allocated(func() { keyLines(deeper[name]) })
		if twice > 3*once {
			t.Errorf("%s: keyLines nested %d deep allocated %d bytes, at twice the depth %d: not linear", name, depth, once, twice)
		}
	}
}

// TestKeyLinesBelowMaxNesting: a key deeper than maxNesting takes the line
// of its ancestor at that depth.
func TestKeyLinesBelowMaxNesting(t *testing.T) {
	text := "a = [\n" + strings.Repeat("[", maxNesting+5) + "\n" + strings.Repeat("]", maxNesting+5) + "\n]\n"
	lines := keyLines(text)
	for _, key := range []string{"a[0]", "a" + strings.Repeat("[0]", maxNesting-1), "a" + strings.Repeat("[0]", maxNesting+5)} {
		if got := lineOf(lines, key); got != 2 {
			t.Errorf("line of %s = %d, want 2", key, got)
		}
	}
	if got := tooDeep(text); got != 2 {
		t.Errorf("tooDeep = %d, want line 2", got)
	}
}
