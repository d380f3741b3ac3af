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
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/registry"
	"github.com/berthhq/berth/retry"
)

// The OpenAPI document (api/openapi.json, served at /v1/openapi.json) is
// checked against the server three ways: its operations against the route
// table and echo's router (paths, methods, roles, path and query parameters,
// request bodies, the auth middleware's answers); its schemas against the
// Go types the handlers encode and decode; and every answer the handler
// tests get against the documented status codes, content types and schemas
// (see checkResponse, called by testHost.do).
//
// The ops console (GET /console, a redirect, and GET /console/*, static
// files) is a web page, not API: it is left out of the document, and the
// test checks that those two are the only routes left out.

var (
	docOnce sync.Once
	docMap  map[string]any
	docErr  error
)

func openapiMap(t *testing.T) map[string]any {
	t.Helper()
	docOnce.Do(func() { docErr = json.Unmarshal(openapiDoc, &docMap) })
	if docErr != nil {
		t.Fatalf("openapi.json: %v", docErr)
	}
	return docMap
}

var consoleRoutes = []string{"GET /console", "GET /console/*"}

var httpMethods = []string{"get", "put", "post", "delete", "patch", "head", "options", "trace"}

// openapiPath turns echo's /a/:name into OpenAPI's /a/{name}.
func openapiPath(echoPath string) string {
	segs := strings.Split(echoPath, "/")
	for i, s := range segs {
		if name, ok := strings.CutPrefix(s, ":"); ok {
			segs[i] = "{" + name + "}"
		}
	}
	return strings.Join(segs, "/")
}

// resolve follows a $ref within the document.
func resolve(doc map[string]any, v any) any {
	for {
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return v
		}
		var cur any = doc
		for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			cm, _ := cur.(map[string]any)
			cur = cm[part]
		}
		if cur == nil {
			panic("openapi.json: unresolved $ref " + ref)
		}
		v = cur
	}
}

func operation(doc map[string]any, method, path string) map[string]any {
	paths, _ := doc["paths"].(map[string]any)
	item, _ := paths[path].(map[string]any)
	op, _ := item[strings.ToLower(method)].(map[string]any)
	return op
}

func parametersOf(doc map[string]any, op map[string]any, in string) map[string]map[string]any {
	out := map[string]map[string]any{}
	params, _ := op["parameters"].([]any)
	for _, p := range params {
		pm := resolve(doc, p).(map[string]any)
		if pm["in"] == in {
			out[pm["name"].(string)] = pm
		}
	}
	return out
}

func TestOpenAPIMatchesRoutes(t *testing.T) {
	doc := openapiMap(t)
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.1.") {
		t.Errorf("openapi %q, want 3.1.x", v)
	}
	checkRefs(t, doc, doc, "#")
	// The served document is the file.
	s := New(Deps{Config: config.Default})
	if r := serve(s, req{method: "GET", path: "/v1/openapi.json"}); r.status != 200 || string(r.body) != string(openapiDoc) ||
		r.header.Get("Content-Type") != "application/json" {
		t.Errorf("GET /v1/openapi.json: %d %s", r.status, r.header.Get("Content-Type"))
	}

	table := map[string]route{}
	for _, r := range s.routeTable() {
		key := r.method + " " + r.path
		if _, dup := table[key]; dup {
			t.Errorf("route %s twice in the table", key)
		}
		table[key] = r
	}
	// echo's routes are the table's and the console's.
	registered := map[string]bool{}
	for _, r := range s.routes() {
		registered[r.Method+" "+r.Path] = true
	}
	for key := range table {
		if !registered[key] {
			t.Errorf("route %s of the table is not registered", key)
		}
	}
	for key := range registered {
		if _, ok := table[key]; !ok && !slices.Contains(consoleRoutes, key) {
			t.Errorf("echo route %s is neither in the table nor the console's", key)
		}
	}
	for _, key := range consoleRoutes {
		if !registered[key] {
			t.Errorf("console route %s is not registered", key)
		}
	}

	// Every operation of the document is a route, and every route is documented.
	documented := map[string]bool{}
	for path, item := range doc["paths"].(map[string]any) {
		for method := range item.(map[string]any) {
			if slices.Contains(httpMethods, method) {
				documented[strings.ToUpper(method)+" "+path] = true
			}
		}
	}
	byOpenAPI := map[string]route{}
	for _, r := range table {
		byOpenAPI[r.method+" "+openapiPath(r.path)] = r
	}
	for key := range documented {
		if _, ok := byOpenAPI[key]; !ok {
			t.Errorf("openapi.json documents %s, which is no route", key)
		}
	}
	src := handlerSources(t)
	for _, r := range s.routeTable() {
		path := openapiPath(r.path)
		op := operation(doc, r.method, path)
		if op == nil {
			t.Errorf("route %s %s is not in openapi.json", r.method, path)
			continue
		}
		name := r.method + " " + path
		// The role, and security to match.
		role, hasRole := op["x-berth-role"]
		sec, hasSec := op["security"].([]any)
		if r.role == "" {
			if hasRole || !hasSec || len(sec) != 0 {
				t.Errorf("%s needs no token: want no x-berth-role and security [], got %v, %v", name, role, op["security"])
			}
		} else if role != string(r.role) || len(sec) == 0 {
			t.Errorf("%s: x-berth-role %v (security %v), want %s", name, role, op["security"], r.role)
		}
		if _, ok := op["operationId"].(string); !ok {
			t.Errorf("%s has no operationId", name)
		}
		// Path parameters: the template's, each required.
		want := map[string]bool{}
		for _, m := range regexp.MustCompile(`\{([^}]+)\}`).FindAllStringSubmatch(path, -1) {
			want[m[1]] = true
		}
		got := parametersOf(doc, op, "path")
		for p := range want {
			if pm, ok := got[p]; !ok || pm["required"] != true {
				t.Errorf("%s: path parameter %s is not documented as required", name, p)
			}
		}
		for p := range got {
			if !want[p] {
				t.Errorf("%s: path parameter %s is not in the path", name, p)
			}
		}
		// Query parameters and body: what the handler's code reads.
		uses := src.uses(r.handler)
		if docQ := slices.Sorted(maps.Keys(parametersOf(doc, op, "query"))); !slices.Equal(docQ, uses.query) {
			t.Errorf("%s: documented query parameters %v, the handler reads %v", name, docQ, uses.query)
		}
		if _, hasBody := op["requestBody"]; hasBody != uses.body {
			t.Errorf("%s: documented request body %v, the handler reads one: %v", name, hasBody, uses.body)
		}
		// Every route with a role answers 401 with its auth, and so is documented.
		resp, _ := op["responses"].(map[string]any)
		if r.role != "" && (resp["401"] == nil || resp["403"] == nil) {
			t.Errorf("%s: 401 and 403 are not documented", name)
		}
	}
}

// TestOpenAPIRolesAreEnforced checks x-berth-role against what the auth
// middleware does, by request: with tokens configured, each operation
// refuses a request without a token (401) and one of a role just short of
// the documented one (403), and lets the documented role through.
func TestOpenAPIRolesAreEnforced(t *testing.T) {
	doc := openapiMap(t)
	cfg, err := config.Parse([]byte(authTOML), "auth.toml")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Deps{Config: func() *config.Config { return cfg }})
	tokens := map[string]string{"reader": readerToken, "operator": operatorToken, "deployer": deployerToken, "admin": adminToken}
	// A role that does not allow the documented one.
	short := map[string]string{"operator": "deployer", "deployer": "operator", "admin": "deployer"}
	for path, item := range doc["paths"].(map[string]any) {
		for method, op := range item.(map[string]any) {
			if !slices.Contains(httpMethods, method) {
				continue
			}
			method = strings.ToUpper(method)
			url := regexp.MustCompile(`\{[^}]+\}`).ReplaceAllString(path, "x")
			role, _ := op.(map[string]any)["x-berth-role"].(string)
			r := serveRecovered(s, req{method: method, path: url})
			if role == "" {
				if r.status == 401 || r.status == 403 {
					t.Errorf("%s %s has no x-berth-role but answers %d without a token", method, path, r.status)
				}
				continue
			}
			if r.status != 401 || r.header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s %s without a token: %d, want 401 with WWW-Authenticate", method, path, r.status)
			}
			if other, ok := short[role]; ok {
				if r := serveRecovered(s, req{method: method, path: url, token: tokens[other]}); r.status != 403 {
					t.Errorf("%s %s (x-berth-role %s) with a %s token: %d, want 403", method, path, role, other, r.status)
				}
			}
			// The documented role passes the middleware (the handler may
			// then fail on the parts this bare server lacks).
			if r := serveRecovered(s, req{method: method, path: url, token: tokens[role]}); r.status == 401 || r.status == 403 {
				t.Errorf("%s %s with a %s token: %d", method, path, role, r.status)
			}
		}
	}
}

// serveRecovered is serve on a server without its parts: a handler that
// reaches for a missing part panics, which means the request passed the
// auth middleware; the answer is then a status 0.
func serveRecovered(s *Server, r req) (resp response) {
	defer func() {
		if recover() != nil {
			resp = response{}
		}
	}()
	return serve(s, r)
}

// TestOpenAPISchemasMatchTypes compares the document's schemas with the Go
// types behind them: the same JSON properties, and (for answers) required
// exactly when the field is always encoded.
func TestOpenAPISchemasMatchTypes(t *testing.T) {
	doc := openapiMap(t)
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	tests := []struct {
		schema  string
		typ     any
		request bool // request schemas say what is required by meaning
	}{
		{"Problem", Problem{}, false},
		{"ModuleInfo", registry.Info{}, false},
		{"HandlerInfo", registry.HandlerInfo{}, false},
		{"AppendRequest", appendRequest{}, true},
		{"EventInput", eventInput{}, true},
		{"Commit", commitJSON{}, false},
		{"Event", eventJSON{}, false},
		{"Subscription", subscriptionJSON{}, false},
		{"Partition", partitionJSON{}, false},
		{"RetrySetting", settingJSON{}, false},
		{"ParkedSettings", parkedJSON{}, false},
		{"ResetRequest", resetRequest{}, true},
		{"OperatorRequest", operatorRequest{}, true},
		{"ParkedRecord", ledger.Record{}, false},
		{"ErrorInfo", ledger.ErrorInfo{}, false},
		{"HistoryEntry", ledger.Entry{}, false},
		{"ProjectionPage", projectionPageJSON{}, false},
		{"ProjectionEntry", projectionEntryJSON{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.schema, func(t *testing.T) {
			sch, ok := schemas[tt.schema].(map[string]any)
			if !ok {
				t.Fatalf("no schema %s", tt.schema)
			}
			props := slices.Sorted(maps.Keys(sch["properties"].(map[string]any)))
			var required []string
			for _, r := range asSlice(sch["required"]) {
				required = append(required, r.(string))
			}
			sort.Strings(required)
			fields, always := jsonFields(reflect.TypeOf(tt.typ))
			if !slices.Equal(props, fields) {
				t.Errorf("properties %v, the Go type has %v", props, fields)
			}
			if !tt.request && !slices.Equal(required, always) {
				t.Errorf("required %v, the Go type always encodes %v", required, always)
			}
			if sch["additionalProperties"] != false {
				t.Errorf("additionalProperties is not false")
			}
		})
	}
	keys := []string{retry.KeyMaxAttempts, retry.KeyInitialBackoff, retry.KeyMaxBackoff, retry.KeyTimeout,
		retry.KeyUnrecoverable, retry.KeyRecoverable, retry.KeyBackpressureAttempts}
	sort.Strings(keys)
	if got := slices.Sorted(maps.Keys(schemas["RetrySettings"].(map[string]any)["properties"].(map[string]any))); !slices.Equal(got, keys) {
		t.Errorf("RetrySettings %v, want the retry keys %v", got, keys)
	}
	states := asSlice(schemas["ParkedRecord"].(map[string]any)["properties"].(map[string]any)["state"].(map[string]any)["enum"])
	if fmt.Sprint(states) != fmt.Sprint([]ledger.State{ledger.StateRetrying, ledger.StateWaiting, ledger.StateResuming}) {
		t.Errorf("parked states %v", states)
	}
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

// jsonFields returns the JSON names of a struct's fields, and those encoded
// always (no omitempty or omitzero).
func jsonFields(t reflect.Type) (all, always []string) {
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		all = append(all, name)
		if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
			always = append(always, name)
		}
	}
	sort.Strings(all)
	sort.Strings(always)
	return all, always
}

// checkRefs fails on a $ref that leads nowhere.
func checkRefs(t *testing.T, doc map[string]any, v any, at string) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		if _, ok := v["$ref"]; ok {
			func() {
				defer func() {
					if e := recover(); e != nil {
						t.Errorf("%s: %v", at, e)
					}
				}()
				resolve(doc, v)
			}()
		}
		for k, e := range v {
			checkRefs(t, doc, e, at+"/"+k)
		}
	case []any:
		for i, e := range v {
			checkRefs(t, doc, e, at+"/"+strconv.Itoa(i))
		}
	}
}

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
