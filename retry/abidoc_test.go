package retry_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/berthhq/berth/guest-sdk/berth"
	"github.com/berthhq/berth/retry"
	"github.com/berthhq/berth/wasm/abi"
)

const (
	abiDoc       = "../wasm/abi/ABI.md"
	tableBegin   = "<!-- builtin-classes:begin -->"
	tableEnd     = "<!-- builtin-classes:end -->"
	updateEnv    = "BERTH_UPDATE_ABI"
	updateAdvice = "run `" + updateEnv + "=1 go test ./retry -run TestABIBuiltinClasses` to regenerate it from retry.Builtins, and commit wasm/abi/ABI.md"
)

// builtinTable is the Markdown table of retry.Builtins that ABI.md carries between its markers.
func builtinTable() string {
	var b strings.Builder
	b.WriteString("| class | kind of | default | given by | when |\n| --- | --- | --- | --- | --- |\n")
	for _, c := range retry.Builtins() {
		parent := ""
		if c.Parent != "" {
			parent = "`" + c.Parent + "`"
		}
		b.WriteString("| `" + c.Name + "` | " + parent + " | " + c.Treatment() + " | " + c.GivenBy + " | " + c.Meaning + " |\n")
	}
	return b.String()
}

// ABI.md's table of builtin classes is retry.Builtins, printed; BERTH_UPDATE_ABI=1 rewrites it.
func TestABIBuiltinClasses(t *testing.T) {
	data, err := os.ReadFile(abiDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	i, j := strings.Index(doc, tableBegin), strings.Index(doc, tableEnd)
	if i < 0 || j < i || strings.Count(doc, tableBegin) != 1 || strings.Count(doc, tableEnd) != 1 {
		t.Fatalf("%s must hold %s and then %s once each, around the table of builtin classes", abiDoc, tableBegin, tableEnd)
	}
	want := "\n" + builtinTable()
	if got := doc[i+len(tableBegin) : j]; got != want {
		if os.Getenv(updateEnv) != "" {
			doc = doc[:i+len(tableBegin)] + want + doc[j:]
			if err := os.WriteFile(abiDoc, []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("rewrote the table of builtin classes in %s", abiDoc)
			return
		}
		t.Errorf("the table of builtin classes in %s is not retry.Builtins: %s\n\nwant:\n%s\ngot:\n%s", abiDoc, updateAdvice, want, got)
	}
}

// Every berth.* name the docs quote (ABI.md, the README, docs/) is a builtin class, or the reserved event
// type of a rejected command: a renamed or removed class cannot linger in them.
func TestDocsNameOnlyBuiltins(t *testing.T) {
	known := map[string]bool{abi.EventCommandRejected: true}
	for _, b := range retry.Builtins() {
		known[b.Name] = true
	}
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	quoted := regexp.MustCompile("`\"?(berth\\.[A-Z][A-Za-z]*)\"?`")
	for _, path := range append([]string{abiDoc, "../README.md"}, docs...) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range quoted.FindAllStringSubmatch(string(data), -1) {
			if !known[m[1]] {
				t.Errorf("%s names %s, which is neither in retry.Builtins nor abi.EventCommandRejected", path, m[1])
			}
		}
	}
}

// Every class the guest SDK declares under the reserved prefix (a NewErrorClass("berth.…", parent) in
// guest-sdk/berth) is in retry.Builtins, with the same parent. The SDK is a module of its own that cannot
// import retry, so its source is read.
func TestSDKClassesAreBuiltin(t *testing.T) {
	builtins := map[string]retry.Builtin{}
	for _, b := range retry.Builtins() {
		builtins[b.Name] = b
	}
	files, err := filepath.Glob("../guest-sdk/berth/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no guest SDK sources: %v", err)
	}
	names := map[string]string{}   // Go identifier -> class name
	parents := map[string]string{} // class name -> parent's Go identifier ("" for nil)
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			spec, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for k, v := range spec.Values {
				call, ok := v.(*ast.CallExpr)
				if !ok || len(call.Args) != 2 {
					continue
				}
				if fn, ok := call.Fun.(*ast.Ident); !ok || fn.Name != "NewErrorClass" {
					continue
				}
				lit, ok := call.Args[0].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				name, err := strconv.Unquote(lit.Value)
				if err != nil || !strings.HasPrefix(name, retry.ReservedPrefix) {
					continue
				}
				names[spec.Names[k].Name] = name
				parents[name] = ""
				if id, ok := call.Args[1].(*ast.Ident); ok && id.Name != "nil" {
					parents[name] = id.Name
				}
			}
			return true
		})
	}
	if len(parents) == 0 {
		t.Fatal("found no NewErrorClass(\"berth.…\", …) in guest-sdk/berth")
	}
	for _, name := range slices.Sorted(maps.Keys(parents)) {
		b, ok := builtins[name]
		if !ok {
			t.Errorf("the guest SDK declares %s, which is not in retry.Builtins (add it to retry/builtin.go)", name)
			continue
		}
		parent := names[parents[name]]
		if parents[name] != "" && parent == "" {
			t.Errorf("the guest SDK declares %s under %s, which is not a reserved class", name, parents[name])
		}
		if parent != b.Parent {
			t.Errorf("the guest SDK declares %s under %q, retry.Builtins under %q", name, parent, b.Parent)
		}
	}
}

// The SDK's exported classes, as a guest sees them (their chain), are retry's builtins with retry's parents.
func TestSDKClassChainsAreBuiltin(t *testing.T) {
	parents := map[string]string{}
	for _, b := range retry.Builtins() {
		parents[b.Name] = b.Parent
	}
	for _, c := range []*berth.ErrorClass{
		berth.ClassPanic, berth.ClassHost, berth.ClassConnectionRefused, berth.ClassOutboundDenied,
		berth.ClassWaitTimeout, berth.ClassUnsupported, berth.ClassTimeout, berth.ClassTrap, berth.ClassMemoryExceeded,
	} {
		var want []string
		for n := c.Name(); n != ""; n = parents[n] {
			want = append(want, n)
		}
		if _, ok := parents[c.Name()]; !ok {
			t.Errorf("berth SDK class %s is not in retry.Builtins", c.Name())
			continue
		}
		if got := c.Chain(); !slices.Equal(got, want) {
			t.Errorf("berth SDK class %s has chain %v, retry.Builtins %v", c.Name(), got, want)
		}
	}
}
