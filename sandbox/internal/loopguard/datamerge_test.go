package loopguard

import (
	"bytes"
	"context"
	"testing"

	"github.com/tetratelabs/wazero"
)

// TestGuestDataMerged: the Go guest's tens of thousands of data segments
// become a few, and memory holds the same bytes after instantiation.
func TestGuestDataMerged(t *testing.T) {
	wasm := guest(t)
	res := rewriteGuest(t, Options{})
	before, after := dataSegments(t, wasm), dataSegments(t, res.Module)
	if before < 1000 || after*100 > before {
		t.Errorf("%d data segments became %d, want a Go guest's thousands merged into tens at most", before, after)
	}
	r := newRuntime(t, wazero.NewRuntimeConfig(), deadlineYield)
	ctx := context.Background()
	mem := func(name string, wasm []byte) []byte {
		cm, err := r.CompileModule(ctx, wasm)
		if err != nil {
			t.Fatal(err)
		}
		// No start function: memory as the data segments leave it.
		m, err := r.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithName(name).WithStartFunctions())
		if err != nil {
			t.Fatal(err)
		}
		b, _ := m.Memory().Read(0, m.Memory().Size())
		return bytes.Clone(b)
	}
	if !bytes.Equal(mem("plain", wasm), mem("rewritten", res.Module)) {
		t.Error("memory after instantiation differs between the module and its rewrite")
	}
	t.Logf("%d data segments -> %d", before, after)
}

// dataSegments counts the data segments of module.
func dataSegments(t *testing.T, module []byte) int {
	t.Helper()
	secs, err := splitSections(module)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secs {
		if s.id == secData {
			n, err := countOnly(s)
			if err != nil {
				t.Fatal(err)
			}
			return int(n)
		}
	}
	return 0
}

// activeData encodes an active segment of memory 0 at off.
func activeData(off int32, data string) []byte {
	b := appendS32([]byte{0, opI32Const}, off)
	b = append(b, opEnd)
	return append(appendU32(b, uint32(len(data))), data...)
}

func dataPayload(segs ...[]byte) []byte {
	out := appendU32(nil, uint32(len(segs)))
	for _, s := range segs {
		out = append(out, s...)
	}
	return out
}

// TestMergeData: segments apart by up to maxDataGap join, in offset order,
// with zeros between them; a section mergeData cannot prove safe to join
// (overlapping segments, a passive one) is left as it is.
func TestMergeData(t *testing.T) {
	got := mergeData(dataPayload(activeData(10, "cd"), activeData(4, "ab"), activeData(10+2+maxDataGap+1, "ef")), 0)
	want := dataPayload(activeData(4, "ab\x00\x00\x00\x00cd"), activeData(10+2+maxDataGap+1, "ef"))
	if !bytes.Equal(got, want) {
		t.Errorf("merged = %x, want %x", got, want)
	}
	for name, payload := range map[string][]byte{
		"overlapping": dataPayload(activeData(4, "abcd"), activeData(6, "ef")),
		"passive":     dataPayload(activeData(4, "ab"), []byte{1, 2, 'x', 'y'}),
		"one segment": dataPayload(activeData(4, "ab")),
		"truncated":   dataPayload(activeData(4, "ab"), activeData(8, "cd"))[:9],
	} {
		if got := mergeData(payload, 0); got != nil {
			t.Errorf("%s: merged into %x, want it left as it is", name, got)
		}
	}
}

// TestMergeDataOnly: MergeData merges the data and keeps the other
// sections byte for byte.
func TestMergeDataOnly(t *testing.T) {
	wasm := guest(t)
	out := MergeData(wasm)
	if n := dataSegments(t, out); n >= dataSegments(t, wasm) {
		t.Errorf("%d data segments after MergeData", n)
	}
	assertSectionsKept(t, wasm, out)
	if _, err := wazero.NewRuntime(context.Background()).CompileModule(context.Background(), out); err != nil {
		t.Fatal(err)
	}
}
