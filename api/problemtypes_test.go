package api

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/berthhq/berth/api/wire"
)

// TestEveryProblemTypeIsCatalogued reads the server's sources for each
// problem type it sends (through problem, badRequest, or a Problem
// literal) and checks that wire's catalogue names it with the status it is
// sent with, so that the catalogue is the one list of them.
func TestEveryProblemTypeIsCatalogued(t *testing.T) {
	uses := []*regexp.Regexp{
		regexp.MustCompile(`problem\(http\.Status(\w+), "([a-z-]+)"`),
		regexp.MustCompile(`(?:badRequest|fieldProblem)\("()([a-z-]+)"`),
		regexp.MustCompile(`problems/([a-z-]+)", Title: [^,]*, Status: (\d+)`),
		regexp.MustCompile(`kind(?:, msg)? = "()([a-z-]+)"`),
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, re := range uses {
			for _, m := range re.FindAllStringSubmatch(string(src), -1) {
				kind, status := m[2], 0
				switch i {
				case 0:
					if status = statusNamed(m[1]); status == 0 {
						t.Errorf("%s: no status named %s", f, m[1])
					}
				case 1:
					status = http.StatusBadRequest
				case 2:
					kind = m[1]
					status = atoi(m[2])
				}
				seen[kind] = true
				want, ok := wire.ProblemStatus(kind)
				switch {
				case !ok:
					t.Errorf("%s sends problem type %q, which the catalogue does not name", f, kind)
				case status != 0 && status != want:
					t.Errorf("%s sends %q with status %d; the catalogue says %d", f, kind, status, want)
				}
			}
		}
	}
	for _, kind := range wire.ProblemNames() {
		if !seen[kind] {
			t.Errorf("the catalogue names %q, which no source sends", kind)
		}
	}
}

func statusNamed(name string) int {
	for code := 100; code < 600; code++ {
		if strings.ReplaceAll(http.StatusText(code), " ", "") == name ||
			strings.ReplaceAll(strings.ReplaceAll(http.StatusText(code), " ", ""), "-", "") == name {
			return code
		}
	}
	return 0
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// TestOpenAPINamesEveryProblemType checks that the OpenAPI document's
// Problem type names each catalogued problem type, and no other.
func TestOpenAPINamesEveryProblemType(t *testing.T) {
	doc, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`"Names the kind of problem, under https://berth.dev/problems/: ([a-z, -]+)\."`).FindSubmatch(doc)
	if m == nil {
		t.Fatal("openapi.json: the Problem type's description no longer lists the problem types")
	}
	named := map[string]bool{}
	for _, k := range strings.Split(string(m[1]), ", ") {
		named[k] = true
		if _, ok := wire.ProblemStatus(k); !ok {
			t.Errorf("openapi.json names problem type %q, which the catalogue does not", k)
		}
	}
	for _, k := range wire.ProblemNames() {
		if !named[k] {
			t.Errorf("openapi.json does not name problem type %q", k)
		}
	}
}
