package testbuild_test

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/berthhq/berth/internal/testing/testbuild"
	"github.com/berthhq/berth/retry"
	"github.com/berthhq/berth/wasm/abi"
)

// classifyCase is one line of wasm/abi/testdata/classify.txt.
type classifyCase struct {
	line                                         int
	parents                                      map[string]string
	procUnrec, procRec, handlerUnrec, handlerRec []string
	kind                                         abi.FailureKind
	sent                                         []string
	verdict                                      string
	chain                                        []string
}

func list(s string) []string {
	if s == "-" {
		return nil
	}
	return strings.Split(s, ",")
}

func classifyCases(t *testing.T) []classifyCase {
	root, err := testbuild.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(root, "wasm", "abi", "testdata", "classify.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []classifyCase
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if strings.HasPrefix(sc.Text(), "#") || sc.Text() == "" {
			continue
		}
		col := strings.Split(sc.Text(), "\t")
		if len(col) != 9 {
			t.Fatalf("classify.txt:%d: %d columns, want 9", n, len(col))
		}
		kind, err := strconv.Atoi(col[5])
		if err != nil {
			t.Fatalf("classify.txt:%d: kind %q", n, col[5])
		}
		c := classifyCase{line: n, parents: map[string]string{}, procUnrec: list(col[1]), procRec: list(col[2]),
			handlerUnrec: list(col[3]), handlerRec: list(col[4]), kind: abi.FailureKind(kind), sent: list(col[6]),
			verdict: col[7], chain: list(col[8])}
		for _, class := range list(col[0]) {
			name, parent, _ := strings.Cut(class, "<")
			c.parents[name] = parent
		}
		cases = append(cases, c)
	}
	return cases
}

// TestClassifyVectors checks the host's classification (retry.Classify, with
// the module's settings taken through the ABI as the registry takes them)
// against the shared cases the Rust test kit's classify answers too.
func TestClassifyVectors(t *testing.T) {
	for _, c := range classifyCases(t) {
		// Through the wire: an empty list is no list, and inherits.
		desc := abi.Description{ABIVersion: abi.Version, Processor: "P", Kind: abi.KindReactor,
			Retry:    abi.RetrySettings{Unrecoverable: c.procUnrec, Recoverable: c.procRec},
			Handlers: []abi.HandlerDesc{{Name: "h", EventTypes: []string{"E"}, Retry: abi.RetrySettings{Unrecoverable: c.handlerUnrec, Recoverable: c.handlerRec}}}}
		for name, parent := range c.parents {
			desc.Classes = append(desc.Classes, abi.ErrorClass{Name: name, Parent: parent})
		}
		got, err := abi.DecodeDescription(abi.AppendDescription(nil, &desc))
		if err != nil {
			t.Fatal(err)
		}
		settings := func(r abi.RetrySettings) retry.Settings {
			return retry.Settings{Unrecoverable: r.Unrecoverable, Recoverable: r.Recoverable}
		}
		pol := retry.Resolve(retry.Layer{Source: retry.SourceProcessor, Settings: settings(got.Retry)},
			retry.Layer{Source: retry.SourceHandler, Settings: settings(got.Handlers[0].Retry)})
		pol.Classes = retry.NewClassTree(c.parents)
		d := retry.Classify(&retry.Failure{Classes: c.sent, Reported: retry.ReportedKind(c.kind)}, &pol, nil)
		if d.Class.String() != c.verdict || !slices.Equal(d.Chain, c.chain) {
			t.Errorf("classify.txt:%d: the host says %s by %v (%s); the file says %s by %v", c.line, d.Class, d.Chain, d.Reason, c.verdict, c.chain)
		}
	}
}
