package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/berthhq/berth/internal/testing/testbuild"
)

// TestEveryImportPointsDown reads the floors of docs/ARCHITECTURE.md and
// checks every package of the three modules against them: each is in the
// table, and none imports a package on a higher floor (test files apart).
func TestEveryImportPointsDown(t *testing.T) {
	root, err := testbuild.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	floors := map[string]int{} // a package, or a prefix ending in "/*"
	row := regexp.MustCompile("(?m)^\\| (\\d+) \\| `([^`]+)` \\|")
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		n, _ := strconv.Atoi(m[1])
		floors[m[2]] = n
	}
	if len(floors) < 10 {
		t.Fatalf("docs/ARCHITECTURE.md: %d floors read, want the table of every package", len(floors))
	}
	floorOf := func(pkg string) (int, bool) {
		if n, ok := floors[pkg]; ok {
			return n, true
		}
		for p, n := range floors {
			if prefix, ok := strings.CutSuffix(p, "/*"); ok && strings.HasPrefix(pkg, prefix+"/") {
				return n, true
			}
		}
		return 0, false
	}

	const module = "github.com/berthhq/berth/"
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...", "./guest-sdk/...", "./wasm/abi/...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	packages := 0
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		from, ok := floorOf(pkg)
		if !ok {
			t.Errorf("%s is on no floor of docs/ARCHITECTURE.md: add it to the table", pkg)
			continue
		}
		packages++
		for _, imp := range fields[1:] {
			dep, ours := strings.CutPrefix(imp, module)
			if !ours {
				continue
			}
			if to, ok := floorOf(dep); ok && to > from {
				t.Errorf("%s (floor %d) imports %s (floor %d): an arrow running up", pkg, from, dep, to)
			}
		}
	}
	t.Logf("%d packages on %d rows of floors", packages, len(floors))
}
