package api

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"math"
	"mime"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// What the OpenAPI tests check answers and handlers with: which query
// parameters a handler reads (from the package's source), and a small JSON
// Schema validator for answers.

// sources is the package's non-test code, to see what handlers read.
type sources struct{ funcs map[string]*ast.FuncDecl }

type handlerUses struct {
	query []string // query parameters read, sorted
	body  bool     // reads the request body
}

func handlerSources(t *testing.T) sources {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	src := sources{funcs: map[string]*ast.FuncDecl{}}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				src.funcs[fd.Name.Name] = fd
			}
		}
	}
	return src
}

// uses finds what a handler reads, following the package's own functions
// and Server methods it calls.
func (s sources) uses(h any) handlerUses {
	full := runtime.FuncForPC(reflect.ValueOf(h).Pointer()).Name()
	name := strings.TrimSuffix(full[strings.LastIndex(full, ".")+1:], "-fm")
	if !strings.HasPrefix(full, "github.com/berthhq/berth/api.") {
		return handlerUses{query: []string{}} // not ours (the Prometheus handler)
	}
	query := map[string]bool{}
	var body bool
	seen := map[string]bool{}
	var walk func(string)
	walk = func(fn string) {
		fd, ok := s.funcs[fn]
		if !ok || seen[fn] {
			return
		}
		seen[fn] = true
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				switch fun := n.Fun.(type) {
				case *ast.Ident:
					walk(fun.Name)
				case *ast.SelectorExpr:
					if fun.Sel.Name == "QueryParam" && len(n.Args) == 1 {
						if lit, ok := n.Args[0].(*ast.BasicLit); ok {
							q, _ := strconv.Unquote(lit.Value)
							query[q] = true
						}
					}
					if id, ok := fun.X.(*ast.Ident); ok && id.Name == "s" {
						walk(fun.Sel.Name)
					}
				}
			case *ast.SelectorExpr:
				if call, ok := n.X.(*ast.CallExpr); ok && n.Sel.Name == "Body" {
					if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Request" {
						body = true
					}
				}
			}
			return true
		})
	}
	walk(name)
	return handlerUses{query: slices.Sorted(maps.Keys(query)), body: body}
}

// checkResponse checks an answer of s against openapi.json: its status is
// documented for the operation, and its body has the documented content
// type and schema. Answers of no documented operation (unknown routes,
// the console) are not checked.
func checkResponse(t *testing.T, s *Server, method, target string, r response) {
	t.Helper()
	hr := httptest.NewRequest(method, target, nil)
	c := s.e.NewContext(hr, nil)
	s.e.Router().Find(method, echoGetPath(hr), c)
	doc := openapiMap(t)
	op := operation(doc, method, openapiPath(c.Path()))
	if op == nil {
		return
	}
	where := fmt.Sprintf("%s %s → %d", method, target, r.status)
	resp, ok := op["responses"].(map[string]any)[strconv.Itoa(r.status)]
	if !ok {
		t.Errorf("%s: status not documented in openapi.json (%.200s)", where, r.body)
		return
	}
	content, _ := resolve(doc, resp).(map[string]any)["content"].(map[string]any)
	if content == nil {
		if len(r.body) != 0 {
			t.Errorf("%s: documented without a body, got %.200s", where, r.body)
		}
		return
	}
	ct, _, _ := mime.ParseMediaType(r.header.Get("Content-Type"))
	media, ok := content[ct].(map[string]any)
	if !ok {
		t.Errorf("%s: Content-Type %q is not documented (%v)", where, ct, slices.Sorted(maps.Keys(content)))
		return
	}
	if ct != "application/json" && ct != "application/problem+json" {
		return
	}
	var v any
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Errorf("%s: body is not JSON: %v", where, err)
		return
	}
	for _, e := range validate(doc, media["schema"], v, "body") {
		t.Errorf("%s: %s", where, e)
	}
}

// echoGetPath is the path echo routes on: the raw path when there is one.
func echoGetPath(r *http.Request) string {
	if r.URL.RawPath != "" {
		return r.URL.RawPath
	}
	return r.URL.Path
}

// validate checks v against the subset of JSON Schema the document uses.
func validate(doc map[string]any, schema any, v any, at string) []string {
	sch, ok := resolve(doc, schema).(map[string]any)
	if !ok {
		return nil
	}
	var errs []string
	fail := func(format string, args ...any) { errs = append(errs, at+": "+fmt.Sprintf(format, args...)) }
	if types := typesOf(sch["type"]); len(types) > 0 && !slices.ContainsFunc(types, func(ty string) bool { return isType(v, ty) }) {
		fail("%s is not of type %v", short(v), types)
		return errs
	}
	if enum, ok := sch["enum"].([]any); ok && !slices.ContainsFunc(enum, func(e any) bool { return reflect.DeepEqual(e, v) }) {
		fail("%s is not one of %v", short(v), enum)
	}
	for _, sub := range asSlice(sch["allOf"]) {
		errs = append(errs, validate(doc, sub, v, at)...)
	}
	switch v := v.(type) {
	case map[string]any:
		props, _ := sch["properties"].(map[string]any)
		for _, r := range asSlice(sch["required"]) {
			if _, ok := v[r.(string)]; !ok {
				fail("required property %s is missing", r)
			}
		}
		for k, e := range v {
			if ps, ok := props[k]; ok {
				errs = append(errs, validate(doc, ps, e, at+"."+k)...)
				continue
			}
			switch ap := sch["additionalProperties"].(type) {
			case bool:
				if !ap {
					fail("property %s is not in the schema", k)
				}
			case map[string]any:
				errs = append(errs, validate(doc, ap, e, at+"."+k)...)
			}
			if pn, ok := sch["propertyNames"]; ok {
				errs = append(errs, validate(doc, pn, k, at+" name "+k)...)
			}
		}
	case []any:
		if n, ok := sch["minItems"].(float64); ok && float64(len(v)) < n {
			fail("%d items, fewer than %v", len(v), n)
		}
		if items, ok := sch["items"]; ok {
			for i, e := range v {
				errs = append(errs, validate(doc, items, e, at+"["+strconv.Itoa(i)+"]")...)
			}
		}
	case float64:
		if n, ok := sch["minimum"].(float64); ok && v < n {
			fail("%v is below %v", v, n)
		}
		if n, ok := sch["maximum"].(float64); ok && v > n {
			fail("%v is above %v", v, n)
		}
	case string:
		if n, ok := sch["minLength"].(float64); ok && float64(utf8.RuneCountInString(v)) < n {
			fail("%q is shorter than %v", v, n)
		}
		if p, ok := sch["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(v) {
			fail("%q does not match %s", v, p)
		}
	}
	return errs
}

func typesOf(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			out = append(out, e.(string))
		}
		return out
	}
	return nil
}

func isType(v any, ty string) bool {
	switch ty {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "null":
		return v == nil
	case "number":
		_, ok := v.(float64)
		return ok
	case "integer":
		f, ok := v.(float64)
		return ok && f == math.Trunc(f)
	}
	return false
}

func short(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 80 {
		b = append(b[:80], "…"...)
	}
	return string(b)
}
