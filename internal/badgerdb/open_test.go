package badgerdb

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/syncbuf"
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

// TestOpensAfterAPowerCut: a cut can leave a write-ahead log and a value
// log whose creation reached the disk but whose size did not (empty files,
// or shorter than their header). Badger alone fails to open such a
// directory once per file (dgraph-io/badger#2207); Open opens it on the
// first try, keeps every synced write, and logs one line saying what it
// recovered from.
func TestOpensAfterAPowerCut(t *testing.T) {
	dir := t.TempDir()
	s := settings(dir)
	s.SyncWrites = true
	db, err := Open(s)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := db.Update(func(tx *badger.Txn) error {
			return tx.Set(fmt.Appendf(nil, "k%03d", i), []byte("v"))
		}); err != nil {
			t.Fatal(err)
		}
	}
	// The disk as a cut leaves it: what was synced, plus the files a cut
	// leaves empty (the next memtable's log, a new value log) or short.
	cut := t.TempDir()
	copyDir(t, dir, cut)
	if err := db.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for name, size := range map[string]int{"00007.mem": 0, "000007.vlog": 0, "00008.mem": 5} {
		if err := os.WriteFile(filepath.Join(cut, name), make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var logged syncbuf.Buffer
	s = settings(cut)
	s.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	db, err = Open(s)
	if err != nil {
		t.Fatalf("open after a cut: %v", err)
	}
	defer db.Close(context.Background())
	if err := db.View(func(tx *badger.Txn) error {
		for i := range 100 {
			if _, err := tx.Get(fmt.Appendf(nil, "k%03d", i)); err != nil {
				return fmt.Errorf("k%03d: %w", i, err)
			}
		}
		return nil
	}); err != nil {
		t.Errorf("a synced write was lost: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(logged.String()), "\n")
	var recovered []string
	for _, l := range lines {
		if strings.Contains(l, "opened after a stop that did not close it") {
			recovered = append(recovered, l)
		}
	}
	if len(recovered) != 1 {
		t.Fatalf("want one line saying what was recovered, got %d in:\n%s", len(recovered), logged.String())
	}
	for _, want := range []string{"level=WARN", "replayed 1 write-ahead log(s): 00001.mem", "00007.mem (0 bytes)", "000007.vlog (0 bytes)", "00008.mem (5 bytes)"} {
		if !strings.Contains(recovered[0], want) {
			t.Errorf("recovery line %q does not say %q", recovered[0], want)
		}
	}
	// A clean close leaves nothing to recover from, and says nothing.
	if err := db.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var again syncbuf.Buffer
	s.Logger = slog.New(slog.NewTextHandler(&again, nil))
	reopened, err := Open(s)
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close(context.Background())
	if strings.Contains(again.String(), "did not close") {
		t.Errorf("a clean stop was reported as a crash: %s", again.String())
	}
}

// copyDir copies the files of src into dst as a read(2) sees them, holes
// kept (a value log is a 2GiB sparse file while it is open).
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if out, err := exec.Command("cp", "-r", "--sparse=always", src+"/.", dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	if err := os.Remove(filepath.Join(dst, "LOCK")); err != nil {
		t.Fatal(err)
	}
}
