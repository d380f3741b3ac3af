package powercut_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/badgerdb"
	"github.com/berthhq/berth/internal/testing/powercut"
	"github.com/dgraph-io/badger/v4"
	"golang.org/x/sys/unix"
)

// helperEnv names the part a re-executed test binary plays: mapping files
// and opening Badger on the mount happen in another process, since a page
// fault served by the process's own FUSE server can deadlock its GC.
const helperEnv = "POWERCUT_TEST_HELPER"

func TestMain(m *testing.M) {
	if role := os.Getenv(helperEnv); role != "" {
		if err := helper(role, os.Args[len(os.Args)-1]); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// helper runs one role on path, reporting on stdout and waiting for a line
// on stdin where the test steps in.
func helper(role, path string) error {
	in := bufio.NewReader(os.Stdin)
	step := func(what string) {
		fmt.Println(what)
		in.ReadString('\n')
	}
	switch role {
	case "mmap":
		// A file made 8 pages long and synced; page 0 written through a
		// shared mapping and msynced, page 1 written and never synced.
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		if err := f.Truncate(8 * 4096); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
		m, err := unix.Mmap(int(f.Fd()), 0, 8*4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			return err
		}
		copy(m[0:], "synced through msync")
		step("written page 0")
		if err := unix.Msync(m[:4096], unix.MS_SYNC); err != nil {
			return err
		}
		step("msynced page 0")
		copy(m[4096:], "never synced")
		step("written page 1")
		if err := unix.Munmap(m); err != nil {
			return err
		}
		step("unmapped")
		if err := f.Close(); err != nil {
			return err
		}
		step("closed")
	case "mmap-new":
		// Badger's way with a new write-ahead log: create, size, map,
		// write; nothing synced.
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return err
		}
		if err := f.Truncate(1 << 20); err != nil {
			return err
		}
		m, err := unix.Mmap(int(f.Fd()), 0, 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			return err
		}
		copy(m[5000:], "never synced")
		unix.Munmap(m)
		f.Close()
		step("done")
	case "badger-write":
		// Sets keys one at a time, with SyncWrites, and says which were
		// acknowledged, until it is killed.
		db, err := openBadger(path)
		if err != nil {
			return err
		}
		for i := 0; ; i++ {
			k := fmt.Sprintf("key-%06d", i)
			if err := db.Update(func(txn *badger.Txn) error {
				return txn.Set([]byte(k), bytes.Repeat([]byte{byte(i)}, 100+i%3000))
			}); err != nil {
				return err
			}
			fmt.Println("ack", i)
		}
	case "badger-read":
		// Opens the store and lists its keys.
		db, err := openBadger(path)
		if err != nil {
			return err
		}
		err = db.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.DefaultIteratorOptions)
			defer it.Close()
			for it.Rewind(); it.Valid(); it.Next() {
				fmt.Println(string(it.Item().Key()))
			}
			return nil
		})
		if err != nil {
			return err
		}
		return db.Close(context.Background())
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	return nil
}

func openBadger(dir string) (*badgerdb.DB, error) {
	return badgerdb.Open(badgerdb.Settings{Store: "powercut-test", Dir: dir, SyncWrites: true, MemTableSize: 4 << 20, BlockCacheSize: 1 << 20})
}

// helperProc is a running helper.
type helperProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
	err bytes.Buffer
}

func startHelper(t *testing.T, role, path string) *helperProc {
	t.Helper()
	h := &helperProc{cmd: exec.Command(os.Args[0], "-test.run=^$", path)}
	h.cmd.Env = append(os.Environ(), helperEnv+"="+role)
	h.cmd.Stderr = &h.err
	var err error
	if h.in, err = h.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := h.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	h.out = bufio.NewScanner(stdout)
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.cmd.Process.Kill(); h.cmd.Wait() })
	return h
}

// expect reads the helper's next line within 30 s and fails unless it is want.
func (h *helperProc) expect(t *testing.T, want string) {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		if h.out.Scan() {
			got <- h.out.Text()
		}
		close(got)
	}()
	select {
	case line, ok := <-got:
		if !ok || line != want {
			t.Fatalf("helper said %q (ended: %v), want %q; stderr: %s", line, !ok, want, h.err.String())
		}
	case <-time.After(30 * time.Second):
		h.cmd.Process.Kill()
		t.Fatalf("helper did not say %q within 30s", want)
	}
}

func (h *helperProc) next() { io.WriteString(h.in, "\n") }

// wait waits up to 30 s for the helper to exit and fails unless it exited 0.
func (h *helperProc) wait(t *testing.T) {
	t.Helper()
	h.in.Close()
	done := make(chan error, 1)
	go func() { done <- h.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("helper: %v; stderr: %s", err, h.err.String())
		}
	case <-time.After(30 * time.Second):
		h.cmd.Process.Kill()
		t.Fatalf("helper did not exit within 30s")
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, path string, data []byte, sync bool) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCutKeepsOnlyWhatWasSynced is the control: written with write(2), a
// synced file survives a cut and an unsynced one does not; an unsynced
// size change is lost while the file's creation is kept; an unsynced
// overwrite of a synced file leaves its synced contents; and before the
// cut every change reads back as written.
func TestCutKeepsOnlyWhatWasSynced(t *testing.T) {
	backing := t.TempDir()
	pc := powercut.Mount(t, backing)
	d := pc.Dir()

	synced := bytes.Repeat([]byte("synced "), 3000)
	writeFile(t, filepath.Join(d, "synced"), synced, true)
	writeFile(t, filepath.Join(d, "unsynced"), []byte("never synced"), false)
	writeFile(t, filepath.Join(d, "overwritten"), []byte("first, synced"), true)
	writeFile(t, filepath.Join(d, "overwritten"), []byte("second, never synced"), false)
	if err := os.Mkdir(filepath.Join(d, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	sized := filepath.Join(d, "sub", "sized")
	f, err := os.Create(sized)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(128 << 20); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("tail"), 1<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// An unsynced shrink of a synced file.
	writeFile(t, filepath.Join(d, "shrunk"), []byte("0123456789"), true)
	if err := os.Truncate(filepath.Join(d, "shrunk"), 4); err != nil {
		t.Fatal(err)
	}
	// Synced after a truncate and a write past the old end: the gap is zeros.
	g, err := os.OpenFile(filepath.Join(d, "gap"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	g.Write([]byte("abcdefgh"))
	g.Truncate(2)
	g.WriteAt([]byte("Z"), 6)
	g.Sync()
	g.Close()

	// Appended to after a sync: the synced part stays.
	writeFile(t, filepath.Join(d, "appended"), []byte("synced;"), true)
	a, err := os.OpenFile(filepath.Join(d, "appended"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	a.Write([]byte("appended"))
	a.Close()

	// Before the cut, everything reads back as written.
	for path, want := range map[string]string{
		"synced": string(synced), "unsynced": "never synced", "overwritten": "second, never synced",
		"shrunk": "0123", "gap": "ab\x00\x00\x00\x00Z", "appended": "synced;appended",
	} {
		if got := readFile(t, filepath.Join(d, path)); string(got) != want {
			t.Errorf("%s before the cut: %q, want %q", path, got[:min(len(got), 40)], want[:min(len(want), 40)])
		}
	}
	if st, err := os.Stat(sized); err != nil || st.Size() != 128<<20 {
		t.Errorf("sized before the cut: %v %v, want 128 MiB", st, err)
	}
	if b := readFile(t, sized); len(b) != 128<<20 || string(b[1<<20:1<<20+4]) != "tail" || b[5] != 0 {
		t.Errorf("sized before the cut: %d bytes, tail %q", len(b), b[1<<20:1<<20+4])
	}
	if n := pc.Dirty(); n != 5 {
		t.Errorf("%d files with unsynced changes, want 5 (unsynced, overwritten, sized, shrunk, appended)", n)
	}

	pc.Cut()
	if err := os.WriteFile(filepath.Join(d, "after"), []byte("x"), 0o644); err == nil {
		t.Errorf("a write after the cut was accepted")
	}
	pc.Remount(t)

	for path, want := range map[string]string{
		"synced": string(synced), "unsynced": "", "overwritten": "first, synced", "sub/sized": "",
		"shrunk": "0123456789", "gap": "ab\x00\x00\x00\x00Z", "appended": "synced;",
	} {
		if got := readFile(t, filepath.Join(d, path)); string(got) != want {
			t.Errorf("%s after the cut: %q, want %q", path, got[:min(len(got), 40)], want[:min(len(want), 40)])
		}
		if got := readFile(t, filepath.Join(backing, path)); string(got) != want {
			t.Errorf("%s on the backing directory: %q, want %q", path, got[:min(len(got), 40)], want[:min(len(want), 40)])
		}
	}
	if _, err := os.Stat(filepath.Join(d, "after")); err == nil {
		t.Errorf("a file made after the cut exists")
	}
	// The mount takes writes again.
	writeFile(t, filepath.Join(d, "again"), []byte("again"), true)
	if got := readFile(t, filepath.Join(backing, "again")); string(got) != "again" {
		t.Errorf("after the remount, a synced write reached the disk as %q", got)
	}
}

// TestRemountWithoutACutKeepsEverything: an orderly unmount writes back
// what was not synced, as the kernel's writeback would.
func TestRemountWithoutACutKeepsEverything(t *testing.T) {
	pc := powercut.Mount(t, t.TempDir())
	path := filepath.Join(pc.Dir(), "f")
	writeFile(t, path, []byte("not synced, written back"), false)
	pc.Remount(t)
	if got := readFile(t, path); string(got) != "not synced, written back" {
		t.Errorf("after a remount without a cut: %q", got)
	}
}

// TestSharedMappingWrites: through a shared writable mapping (as Badger
// writes its logs), an msynced page survives a cut and a page written and
// unmapped without msync does not; a file created, sized and written
// through a mapping without a sync is left empty, its creation kept and its
// size lost — the state that breaks Badger's open. It logs what the file
// system held at each step: a mapping's writes arrive as write requests
// at msync, or at munmap/close, not as the program stores into the page.
func TestSharedMappingWrites(t *testing.T) {
	backing := t.TempDir()
	pc := powercut.Mount(t, backing)
	path := filepath.Join(pc.Dir(), "mapped")
	h := startHelper(t, "mmap", path)
	step := func(want string) {
		h.expect(t, want)
		t.Logf("%s: %d write requests so far, %d files with unsynced changes", want, pc.Writes(), pc.Dirty())
	}
	step("written page 0")
	w0 := pc.Writes()
	h.next()
	step("msynced page 0")
	if pc.Writes() == w0 {
		t.Errorf("msync sent no write request")
	}
	if b := readFile(t, filepath.Join(backing, "mapped")); !bytes.HasPrefix(b, []byte("synced through msync")) {
		t.Errorf("after msync the disk holds %q", b[:min(len(b), 20)])
	}
	h.next()
	step("written page 1")
	h.next()
	step("unmapped")
	h.next()
	step("closed")
	h.next()
	h.wait(t)
	if b := readFile(t, path); len(b) != 8*4096 || !bytes.HasPrefix(b[4096:], []byte("never synced")) {
		t.Errorf("before the cut, page 1 reads %q", b[4096:4096+12])
	}
	pc.Cut()
	pc.Remount(t)
	b := readFile(t, path)
	if len(b) != 8*4096 || !bytes.HasPrefix(b, []byte("synced through msync")) {
		t.Errorf("after the cut, %d bytes starting %q; want 32768 starting with the msynced text", len(b), b[:min(len(b), 20)])
	}
	if len(b) >= 8192 && !bytes.Equal(b[4096:8192], make([]byte, 4096)) {
		t.Errorf("after the cut, page 1 holds %q; want zeros", b[4096:4096+12])
	}

	fresh := filepath.Join(pc.Dir(), "fresh.mem")
	h = startHelper(t, "mmap-new", fresh)
	h.expect(t, "done")
	h.next()
	h.wait(t)
	if st, err := os.Stat(fresh); err != nil || st.Size() != 1<<20 {
		t.Fatalf("before the cut, the fresh file: %v %v", st, err)
	}
	pc.Cut()
	pc.Remount(t)
	if st, err := os.Stat(fresh); err != nil || st.Size() != 0 {
		t.Errorf("after the cut, the fresh file: %v %v; want it there, empty", st, err)
	}
}

// TestBadgerKeepsWhatItAcknowledged: a Badger store opened as our stores
// open it, with SyncWrites, takes single-key commits from another process
// until a cut at a random moment (seeded, logged); after the remount it
// opens at the first try and holds every key whose commit had returned.
func TestBadgerKeepsWhatItAcknowledged(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("POWERCUT_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	after := 200 + rng.IntN(1500)
	t.Logf("seed %d (POWERCUT_SEED): cut after %d acknowledged commits", seed, after)

	pc := powercut.Mount(t, t.TempDir())
	dir := filepath.Join(pc.Dir(), "db")
	h := startHelper(t, "badger-write", dir)
	acked := -1
	deadline := time.After(60 * time.Second)
	lines := make(chan string)
	go func() {
		for h.out.Scan() {
			lines <- h.out.Text()
		}
		close(lines)
	}()
	for acked+1 < after {
		select {
		case line, ok := <-lines:
			if !ok {
				h.cmd.Wait()
				t.Fatalf("the writer ended after %d commits: %s", acked+1, h.err.String())
			}
			n, err := strconv.Atoi(strings.TrimPrefix(line, "ack "))
			if err != nil || n != acked+1 {
				t.Fatalf("writer said %q after ack %d", line, acked)
			}
			acked = n
		case <-deadline:
			t.Fatalf("%d of %d commits within 60s", acked+1, after)
		}
	}
	pc.Cut()
	h.cmd.Process.Signal(syscall.SIGKILL)
	h.cmd.Wait()
	for line := range lines { // acknowledged before the kill took
		if n, err := strconv.Atoi(strings.TrimPrefix(line, "ack ")); err == nil && n == acked+1 {
			acked = n
		}
	}
	pc.Remount(t)

	r := startHelper(t, "badger-read", dir)
	r.in.Close()
	keys := map[string]bool{}
	for r.out.Scan() {
		keys[r.out.Text()] = true
	}
	r.wait(t)
	missing := 0
	for i := 0; i <= acked; i++ {
		if !keys[fmt.Sprintf("key-%06d", i)] {
			if missing < 5 {
				t.Errorf("key-%06d was acknowledged and is gone", i)
			}
			missing++
		}
	}
	t.Logf("%d commits acknowledged, %d keys after the cut, %d missing", acked+1, len(keys), missing)
	if missing > 0 {
		t.Errorf("%d of %d acknowledged commits lost", missing, acked+1)
	}
}
