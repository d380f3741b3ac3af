package badgerdb

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

func settings(dir string) Settings {
	return Settings{Store: "eventlog", Dir: dir, MemTableSize: 4 << 20, BlockCacheSize: 1 << 20}
}

// TestOpenErrorNamesTheFile: a store that fails to open on one of its files
// says which, and why, on one line.
func TestOpenErrorNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(settings(dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	vlogs, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
	if len(vlogs) == 0 {
		t.Fatal("no value log file after a first open")
	}
	// A value log that cannot be opened: a directory in its place.
	if err := os.Remove(vlogs[0]); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(vlogs[0], 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = Open(settings(dir))
	if err == nil {
		t.Fatal("open with a directory for a value log succeeded")
	}
	msg := err.Error()
	for _, want := range []string{"eventlog: open " + dir, "file " + vlogs[0] + ":", "is a directory"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error %q is more than one line", msg)
	}
}

// TestCloseIsBounded: a database whose directory was removed cannot flush
// its memtable (Badger retries that forever); Close gives up waiting when
// its context ends and says what it could not flush and why.
func TestCloseIsBounded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "events")
	db, err := Open(settings(dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(txn *badger.Txn) error { return txn.Set([]byte("k"), []byte("v")) }); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	err = db.Close(ctx)
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("Close took %s", took)
	}
	if err == nil {
		t.Fatal("Close of a database whose directory was removed succeeded")
	}
	msg := err.Error()
	for _, want := range []string{"eventlog", dir, "not flushed", "deadline exceeded", "no such file or directory"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
}
