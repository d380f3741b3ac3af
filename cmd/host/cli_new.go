package main

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/template"

	"github.com/spf13/cobra"
)

// newTemplates are the files `berth new` writes: newtemplates/LANG/common
// for every kind, newtemplates/LANG/KIND for one; a name ending in .tmpl
// loses it (so that no template is a Go file or a Cargo.toml of this
// repository).
//
//go:embed all:newtemplates
var newTemplates embed.FS

// newKinds and newLangs are what `berth new` can write.
var (
	newKinds = []string{"reactor", "projection", "saga"}
	newLangs = []string{"go", "rust"}
)

// newHelp is the help of `berth new`.
const newHelp = `Write a handler module to start from, outside this repository: a processor of KIND
(reactor, projection or saga) named after NAME, with one handler of OrderPlaced events, one
test, the build files and a build script. It builds and passes its test as written:

  go:    go test ./...             then ./build.sh  (GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared)
  rust:  cargo test                then ./build.sh  (cargo build --release --target wasm32-wasip1,
                                                    or wasm32-wasi before Rust 1.78: the one rustc has)

./build.sh writes NAME.wasm; upload it with "berth modules push NAME NAME.wasm". The module's
README.md says how to configure it in berth.toml, and how to move from this checkout's SDK to
the published one once it exists.

NAME is lower-case letters, digits and '-', starting with a letter; the processor is its
CamelCase (my-notifier: MyNotifier). The SDK is used from a Berth checkout: --sdk PATH, by
default the checkout this binary was built from (a go.mod "replace", a Cargo.toml path).`

// newOptions are the flags of `berth new`.
type newOptions struct {
	lang, sdk, dir string
}

// newCmd is `berth new KIND NAME`.
func (a *app) newCmd() *cobra.Command {
	o := &newOptions{}
	c := &cobra.Command{
		Use:   "new reactor|projection|saga NAME --lang go|rust",
		Short: "Write a handler module to start from: build files, a handler, a test",
		Long:  newHelp,
		Example: `  berth new reactor my-notifier --lang go
  berth new projection order-totals --lang rust --sdk ~/src/berth --dir /tmp/order-totals`,
		Args: exactArgs(2),
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return newKinds, cobra.ShellCompDirectiveNoFileComp
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(_ *cobra.Command, args []string) error {
			dir, err := writeNew(args[0], args[1], *o)
			if err != nil {
				return err
			}
			test, sh := "go test ./...", "./build.sh"
			if o.lang == "rust" {
				test = "cargo test --offline"
			}
			fmt.Fprintf(a.stdout, "wrote %s\nnext: cd %s && %s && %s   (then: berth modules push %s %s.wasm)\n",
				dir, dir, test, sh, args[1], args[1])
			return nil
		},
	}
	fs := c.Flags()
	fs.StringVar(&o.lang, "lang", "", "the module's language, `LANG`: go or rust (required)")
	fs.StringVar(&o.sdk, "sdk", "", "the Berth checkout whose SDK the module uses (`PATH`; default: the one this binary was built from)")
	fs.StringVar(&o.dir, "dir", "", "where to write the module (`DIR`, new or empty; default: ./NAME)")
	return c
}

// newModule is what the templates are executed with.
type newModule struct {
	Name      string // the module, directory, Go module and crate: my-notifier
	Processor string // MyNotifier
	Kind      string // reactor, projection or saga
	Crate     string // the crate's name in Rust code and the .wasm cargo writes: my_notifier
	SDK       string // the checkout's absolute path
	GoVersion string // the go line of the SDK's go.mod
}

// writeNew checks the arguments, writes the module and returns its directory.
func writeNew(kind, name string, o newOptions) (string, error) {
	if !slices.Contains(newKinds, kind) {
		return "", usagef("unknown kind %q: one of %s", kind, strings.Join(newKinds, ", "))
	}
	if err := newName(name); err != nil {
		return "", usagef("NAME %q: %v", name, err)
	}
	if !slices.Contains(newLangs, o.lang) {
		return "", usagef("--lang go or --lang rust is required")
	}
	sdk, err := findSDK(o.sdk)
	if err != nil {
		return "", usageError{msg: err.Error()}
	}
	m := newModule{Name: name, Processor: camel(name), Kind: kind, Crate: strings.ReplaceAll(name, "-", "_"), SDK: sdk}
	if m.GoVersion, err = goLine(filepath.Join(sdk, "guest-sdk", "go.mod")); err != nil {
		return "", runError{err}
	}
	dir := o.dir
	if dir == "" {
		dir = name
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return "", usagef("%s exists and is not empty", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", runError{err}
	}
	for _, part := range []string{"common", kind} {
		if err := writeTemplates(dir, path.Join("newtemplates", o.lang, part), m); err != nil {
			return "", runError{err}
		}
	}
	return dir, nil
}

// writeTemplates executes every template under root into dir, keeping the
// layout; a shell script is executable.
func writeTemplates(dir, root string, m newModule) error {
	return fs.WalkDir(newTemplates, root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		text, err := newTemplates.ReadFile(p)
		if err != nil {
			return err
		}
		t, err := template.New(p).Funcs(template.FuncMap{"quote": strconv.Quote}).Parse(string(text))
		if err != nil {
			return err
		}
		var out bytes.Buffer
		if err := t.Execute(&out, m); err != nil {
			return err
		}
		rel := strings.TrimSuffix(strings.TrimPrefix(p, root+"/"), ".tmpl")
		dst := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(rel, ".sh") {
			mode = 0o755
		}
		return os.WriteFile(dst, out.Bytes(), mode)
	})
}

// newName accepts a name fit for a directory, a Go module, a crate and a
// Berth module: lower-case letters, digits and '-', from a letter.
func newName(s string) error {
	if s == "" || len(s) > 64 {
		return errors.New("use 1 to 64 characters")
	}
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z':
		case (c >= '0' && c <= '9') || c == '-':
			if i == 0 {
				return errors.New("must start with a lower-case letter")
			}
		default:
			return fmt.Errorf("character %q not allowed (use lower-case letters, digits and '-')", c)
		}
	}
	return nil
}

// camel is the processor's name of a module name: my-notifier is MyNotifier.
func camel(name string) string {
	var b strings.Builder
	for _, part := range strings.Split(name, "-") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}

// findSDK is the Berth checkout to take the SDK from: given, or the one this
// binary was built from (its source path, as the compiler recorded it, or a
// directory above the binary), checked to hold both SDKs.
func findSDK(given string) (string, error) {
	if given != "" {
		abs, err := filepath.Abs(given)
		if err != nil {
			return "", err
		}
		if err := isCheckout(abs); err != nil {
			return "", fmt.Errorf("--sdk %s: %v", given, err)
		}
		return abs, nil
	}
	var candidates []string
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		candidates = append(candidates, filepath.Dir(filepath.Dir(filepath.Dir(file)))) // …/cmd/host/cli_new.go
	}
	if exe, err := os.Executable(); err == nil {
		for d := filepath.Dir(exe); ; d = filepath.Dir(d) {
			candidates = append(candidates, d)
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return firstCheckout(candidates)
}

// firstCheckout is the first of the directories that is a Berth checkout;
// none is an error that names --sdk.
func firstCheckout(candidates []string) (string, error) {
	for _, c := range candidates {
		if isCheckout(c) == nil {
			return c, nil
		}
	}
	return "", errors.New("cannot find the Berth checkout this binary was built from: name one with --sdk PATH (the directory holding guest-sdk/)")
}

// isCheckout checks that dir holds the Go and the Rust SDK.
func isCheckout(dir string) error {
	for _, f := range []string{"guest-sdk/go.mod", "guest-sdk/rust/Cargo.toml", "wasm/abi/go.mod"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return fmt.Errorf("not a Berth checkout: no %s", f)
		}
	}
	return nil
}

// goLine reads the version of the go line of a go.mod: a module that
// requires the SDK needs at least the SDK's.
func goLine(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "go "); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("%s has no go line", gomod)
}
