package api

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/berthhq/berth/api/wire"
	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/ledger"
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
		// The request body's media types are the route table's, which
		// accepts enforces.
		var docTypes []string
		if rb, ok := op["requestBody"]; ok {
			content, _ := resolve(doc, rb).(map[string]any)["content"].(map[string]any)
			docTypes = slices.Sorted(maps.Keys(content))
		}
		if tableTypes := slices.Sorted(slices.Values(r.body)); !slices.Equal(docTypes, tableTypes) {
			t.Errorf("%s: documented request body types %v, the route table's %v", name, docTypes, tableTypes)
		}
		if !changesState(r.method) && len(r.body) > 0 {
			t.Errorf("%s: a safe method with body types %v, which nothing checks", name, r.body)
		}
		// Every route with a role answers 401 with its auth, and so is
		// documented; every route answers 403 to a foreign Host, and every
		// state-changing one 403 to another origin and 415 to a body of
		// another type.
		resp, _ := op["responses"].(map[string]any)
		if r.role != "" && resp["401"] == nil {
			t.Errorf("%s: 401 is not documented", name)
		}
		if resp["403"] == nil {
			t.Errorf("%s: 403 is not documented", name)
		}
		if changesState(r.method) && resp["415"] == nil {
			t.Errorf("%s: 415 is not documented", name)
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
// types behind them (package wire): the same JSON properties, and (for
// answers) required exactly when the field is always encoded.
func TestOpenAPISchemasMatchTypes(t *testing.T) {
	doc := openapiMap(t)
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	tests := wireSchemas
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
	if fmt.Sprint(states) != fmt.Sprint([]ledger.State{ledger.StateRetrying, ledger.StateWaiting, ledger.StateResuming}) ||
		fmt.Sprint(states) != fmt.Sprint(wire.ParkedStates()) {
		t.Errorf("parked states %v", states)
	}
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

// jsonFields returns the JSON names of a struct's fields, and those encoded
// always (no omitempty or omitzero).
func jsonFields(t reflect.Type) (all, always []string) {
	for f := range t.Fields() {
		if f.Anonymous && f.Tag.Get("json") == "" {
			// An embedded struct's fields are encoded as the outer's.
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			a, w := jsonFields(et)
			all, always = append(all, a...), append(always, w...)
			continue
		}
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
