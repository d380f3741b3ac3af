package durable_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/berthhq/berth/internal/durable"
)

// TestWriteFile: a file is made, then replaced whole, with its mode, and no
// temporary file is left beside it.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.json")
	for _, content := range []string{"first", "second, longer"} {
		if err := durable.WriteFile(path, []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Fatalf("read %q, %v; want %q", got, err, content)
		}
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, %v; want 0640", fi.Mode().Perm(), err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("want only a.json in the directory, got %v", entries)
	}
}

// TestWriteFileIntoMissingDir fails naming the file, and makes nothing.
func TestWriteFileIntoMissingDir(t *testing.T) {
	if err := durable.WriteFile(filepath.Join(t.TempDir(), "no", "a"), nil, 0o644); err == nil {
		t.Fatal("wrote into a directory that does not exist")
	}
}

// TestMkdirAllAndRemove: MkdirAll makes every missing level and accepts one
// that exists; it refuses a file in the way; Remove takes a file and
// accepts one already gone.
func TestMkdirAllAndRemove(t *testing.T) {
	root := t.TempDir()
	deep := filepath.Join(root, "a", "b", "c")
	for range 2 {
		if err := durable.MkdirAll(deep, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if fi, err := os.Stat(deep); err != nil || !fi.IsDir() {
		t.Fatalf("stat %s: %v", deep, err)
	}
	file := filepath.Join(deep, "f")
	if err := durable.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := durable.MkdirAll(filepath.Join(file, "d"), 0o755); err == nil {
		t.Error("made a directory under a file")
	}
	for range 2 {
		if err := durable.Remove(file); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("%s still there: %v", file, err)
	}
}

// TestLink: a link replaces the file at its path whole, names the same
// bytes as its source (which outlive the source's removal), and leaves no
// temporary file; a missing source fails and changes nothing.
func TestLink(t *testing.T) {
	dir := t.TempDir()
	from, path := filepath.Join(dir, "v1.wasm"), filepath.Join(dir, "current.wasm")
	if err := durable.WriteFile(from, []byte("new bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := durable.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := durable.Link(filepath.Join(dir, "missing"), path); err == nil {
		t.Fatal("linked a file that does not exist")
	}
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Fatalf("a failed link left %q, want the old file", got)
	}
	if err := durable.Link(from, path); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(from); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != "new bytes" {
		t.Fatalf("read %q, %v; want the linked bytes", got, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("want only current.wasm in the directory, got %v", entries)
	}
}
