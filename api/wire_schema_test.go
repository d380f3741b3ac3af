package api

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/api/wire"
)

// wireSchemas are the struct types of package wire, each under the name of
// its schema in openapi.json (a type has its schema's name).
var wireSchemas = []struct {
	schema  string
	typ     any
	request bool // request schemas say what is required by meaning
}{
	{"Problem", wire.Problem{}, false},
	{"Health", wire.Health{}, false},
	{"DiskStatus", wire.DiskStatus{}, false},
	{"ModuleInfo", wire.ModuleInfo{}, false},
	{"HandlerInfo", wire.HandlerInfo{}, false},
	{"ModuleList", wire.ModuleList{}, false},
	{"ModuleVersion", wire.ModuleVersion{}, false},
	{"ModuleVersionList", wire.ModuleVersionList{}, false},
	{"RollbackRequest", wire.RollbackRequest{}, true},
	{"AppendRequest", wire.AppendRequest{}, true},
	{"EventInput", wire.EventInput{}, true},
	{"AppendResult", wire.AppendResult{}, false},
	{"BatchAppendRequest", wire.BatchAppendRequest{}, true},
	{"BatchAppendResult", wire.BatchAppendResult{}, false},
	{"BatchAppendItem", wire.BatchAppendItem{}, false},
	{"Commit", wire.Commit{}, false},
	{"Event", wire.Event{}, false},
	{"CommitList", wire.CommitList{}, false},
	{"Subscription", wire.Subscription{}, false},
	{"SubscriptionList", wire.SubscriptionList{}, false},
	{"Partition", wire.Partition{}, false},
	{"RetrySetting", wire.RetrySetting{}, false},
	{"ParkedSettings", wire.ParkedSettings{}, false},
	{"ResetRequest", wire.ResetRequest{}, true},
	{"PauseRequest", wire.PauseRequest{}, true},
	{"OperatorRequest", wire.OperatorRequest{}, true},
	{"ParkedRecord", wire.ParkedRecord{}, false},
	{"ParkedRecordDetail", wire.ParkedRecordDetail{}, false},
	{"ParkedPage", wire.ParkedPage{}, false},
	{"ParkedGroup", wire.ParkedGroup{}, false},
	{"ParkedGroupPage", wire.ParkedGroupPage{}, false},
	{"ProofRequest", wire.ProofRequest{}, true},
	{"ProofAggregate", wire.ProofAggregate{}, true},
	{"Proof", wire.Proof{}, false},
	{"JobProof", wire.JobProof{}, true},
	{"ErrorInfo", wire.ErrorInfo{}, false},
	{"HistoryEntry", wire.HistoryEntry{}, false},
	{"ProjectionPage", wire.ProjectionPage{}, false},
	{"AuditEntry", wire.AuditEntry{}, false},
	{"AuditPage", wire.AuditPage{}, false},
	{"ResolvedRecord", wire.ResolvedRecord{}, false},
	{"ResolvedPage", wire.ResolvedPage{}, false},
	{"JobFilter", wire.JobFilter{}, true},
	{"JobRequest", wire.JobRequest{}, true},
	{"JobDryRun", wire.JobDryRun{}, false},
	{"JobFailure", wire.JobFailure{}, false},
	{"Job", wire.Job{}, false},
	{"JobList", wire.JobList{}, false},
	{"ProjectionEntry", wire.ProjectionEntry{}, false},
	{"Cluster", wire.Cluster{}, false},
	{"ClusterHost", wire.ClusterHost{}, false},
	{"ClusterSubscription", wire.ClusterSubscription{}, false},
	{"PartitionOwner", wire.PartitionOwner{}, false},
	{"ClusterStats", wire.ClusterStats{}, false},
}

// wireMaps are the map types of package wire, each its schema's name.
var wireMaps = []any{wire.ParkedCounts{}, wire.RetrySettings{}, wire.ModuleCounts{}}

// wireInline are the types of package wire whose schemas openapi.json
// writes inline, operation by operation (each with its own enum).
var wireInline = []any{wire.Status{}}

// TestWireTypesMatchSchemas keeps package wire and openapi.json one
// description of the API: every exported type of wire has its schema and
// every schema its type, and each field's Go type encodes to the JSON type,
// format and nested schema the document gives its property — so a field
// whose type changes (a time becoming a string, a list a map) fails here
// before any client sees it.
func TestWireTypesMatchSchemas(t *testing.T) {
	doc := openapiMap(t)
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)

	known := map[string]bool{}
	for _, ws := range wireSchemas {
		if name := reflect.TypeOf(ws.typ).Name(); name != ws.schema {
			t.Errorf("wire.%s stands for schema %s: give them one name", name, ws.schema)
		}
		known[ws.schema] = true
	}
	for _, v := range slices.Concat(wireMaps, wireInline) {
		known[reflect.TypeOf(v).Name()] = true
	}
	for _, name := range wireTypeNames(t) {
		if !known[name] {
			t.Errorf("wire.%s is in no list of this test: add it, with its schema in openapi.json", name)
		}
	}
	for name := range schemas {
		if !known[name] {
			t.Errorf("schema %s has no type in package wire", name)
		}
	}

	for _, ws := range wireSchemas {
		sch, _ := schemas[ws.schema].(map[string]any)
		props, _ := sch["properties"].(map[string]any)
		for _, f := range jsonStructFields(reflect.TypeOf(ws.typ)) {
			if ps, ok := props[f.name]; ok { // a missing property is TestOpenAPISchemasMatchTypes's to report
				for _, e := range schemaMatchesType(ps, f.typ) {
					t.Errorf("%s.%s: %s", ws.schema, f.name, e)
				}
			}
		}
	}
	for _, v := range wireMaps {
		typ := reflect.TypeOf(v)
		sch, _ := schemas[typ.Name()].(map[string]any)
		if !slices.Contains(typesOf(sch["type"]), "object") {
			t.Errorf("%s: a map encodes as an object, the schema says %v", typ.Name(), sch["type"])
		}
		values := slices.Collect(maps.Values(mapOr(sch["properties"])))
		if ap, ok := sch["additionalProperties"].(map[string]any); ok {
			values = append(values, ap)
		}
		if len(values) == 0 {
			t.Errorf("%s: the schema says nothing of the map's values", typ.Name())
		}
		for _, ps := range values {
			for _, e := range schemaMatchesType(ps, typ.Elem()) {
				t.Errorf("%s value: %s", typ.Name(), e)
			}
		}
	}

	// wire.Status: the answers of resume and skip, written inline.
	statusFields, _ := jsonFields(reflect.TypeOf(wire.Status{}))
	for _, action := range []string{"resume", "skip"} {
		path := "/v1/subscriptions/{name}/parked/{type}/{id}/" + action
		resp := mapOr(mapOr(operation(doc, "POST", path)["responses"])["202"])
		sch := mapOr(mapOr(mapOr(mapOr(resolve(doc, resp))["content"])["application/json"])["schema"])
		if got := slices.Sorted(maps.Keys(mapOr(sch["properties"]))); !slices.Equal(got, statusFields) {
			t.Errorf("POST %s → 202: properties %v, wire.Status has %v", path, got, statusFields)
		}
		for _, r := range asSlice(sch["required"]) {
			if !slices.Contains(statusFields, r.(string)) {
				t.Errorf("POST %s → 202 requires %v, not in wire.Status", path, r)
			}
		}
	}
}

// wireTypeNames lists the exported types declared in package wire's source.
func wireTypeNames(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("wire", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("package wire's source: %v (%d files)", err, len(files))
	}
	var names []string
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
			if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.TYPE {
				for _, sp := range gd.Specs {
					if ts := sp.(*ast.TypeSpec); ts.Name.IsExported() {
						names = append(names, ts.Name.Name)
					}
				}
			}
		}
	}
	return names
}

type jsonField struct {
	name string
	typ  reflect.Type
}

// jsonStructFields returns a struct's fields as JSON encodes them, the
// fields of embedded structs as the outer's.
func jsonStructFields(t reflect.Type) []jsonField {
	var out []jsonField
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if f.Anonymous && tag == "" {
			out = append(out, jsonStructFields(deref(f.Type))...)
			continue
		}
		if !f.IsExported() || tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		out = append(out, jsonField{name, f.Type})
	}
	return out
}

// schemaMatchesType says how a property's schema disagrees with what the Go
// type encodes to. A struct or named map must be a $ref to its own schema
// (checked on its own); lists are checked through their items.
func schemaMatchesType(schema any, t reflect.Type) []string {
	t = deref(t)
	sch := mapOr(schema)
	if ref, ok := sch["$ref"].(string); ok {
		if name := ref[strings.LastIndex(ref, "/")+1:]; name != t.Name() || t.PkgPath() != reflect.TypeFor[wire.Problem]().PkgPath() {
			return []string{"the schema is " + ref + ", the Go type " + t.String()}
		}
		return nil
	}
	types := typesOf(sch["type"])
	want := func(ty string) []string {
		if !slices.Contains(types, ty) {
			return []string{t.String() + " encodes as " + ty + ", the schema says " + strings.Join(types, "|")}
		}
		return nil
	}
	switch {
	case t == reflect.TypeFor[time.Time]():
		if sch["format"] != "date-time" {
			return append(want("string"), "a time encodes as an RFC 3339 date-time, the schema's format is "+short(sch["format"]))
		}
		return want("string")
	case t == reflect.TypeFor[json.RawMessage]():
		if len(types) > 0 {
			return []string{"raw JSON may be any value, the schema says " + strings.Join(types, "|")}
		}
		return nil
	case t.Kind() == reflect.Interface:
		return nil // any value the schema allows
	case t.Kind() == reflect.String:
		return want("string")
	case t.Kind() == reflect.Bool:
		return want("boolean")
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		return want("integer")
	case t.Kind() == reflect.Float64 || t.Kind() == reflect.Float32:
		return want("number")
	case t.Kind() == reflect.Slice:
		if errs := want("array"); errs != nil {
			return errs
		}
		return schemaMatchesType(sch["items"], t.Elem())
	}
	return []string{t.String() + " must be a $ref to the schema of its own name"}
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func mapOr(v any) map[string]any { m, _ := v.(map[string]any); return m }

// TestSchemaMatchesType: the checker itself tells a matching schema from
// one that disagrees with the Go type.
func TestSchemaMatchesType(t *testing.T) {
	obj := func(s string) any {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		schema string
		typ    reflect.Type
		ok     bool
	}{
		{`{"type":"string","format":"date-time"}`, reflect.TypeFor[time.Time](), true},
		{`{"type":"string"}`, reflect.TypeFor[time.Time](), false},
		{`{"type":"integer"}`, reflect.TypeFor[time.Time](), false},
		{`{"type":"integer","minimum":0}`, reflect.TypeFor[uint64](), true},
		{`{"type":"integer"}`, reflect.TypeFor[string](), false},
		{`{"type":"string"}`, reflect.TypeFor[int](), false},
		{`{"type":"boolean"}`, reflect.TypeFor[bool](), true},
		{`{"type":["array","null"],"items":{"type":"string"}}`, reflect.TypeFor[[]string](), true},
		{`{"type":"array","items":{"type":"integer"}}`, reflect.TypeFor[[]string](), false},
		{`{"type":"string"}`, reflect.TypeFor[[]string](), false},
		{`{"type":"array","items":{"$ref":"#/components/schemas/HistoryEntry"}}`, reflect.TypeFor[[]wire.HistoryEntry](), true},
		{`{"type":"array","items":{"$ref":"#/components/schemas/ErrorInfo"}}`, reflect.TypeFor[[]wire.HistoryEntry](), false},
		{`{"$ref":"#/components/schemas/ErrorInfo"}`, reflect.TypeFor[*wire.ErrorInfo](), true},
		{`{"type":"object"}`, reflect.TypeFor[wire.ErrorInfo](), false},
		{`{"$ref":"#/components/schemas/Event"}`, reflect.TypeFor[struct{ Event string }](), false},
		{`{"description":"any JSON"}`, reflect.TypeFor[json.RawMessage](), true},
		{`{"type":"string"}`, reflect.TypeFor[json.RawMessage](), false},
		{`{"type":["integer","string","array"]}`, reflect.TypeFor[any](), true},
	}
	for _, tt := range tests {
		errs := schemaMatchesType(obj(tt.schema), tt.typ)
		if (len(errs) == 0) != tt.ok {
			t.Errorf("%s against %s: errors %q, want ok %v", tt.typ, tt.schema, errs, tt.ok)
		}
	}
}
