package diskspace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/clock"
)

const MiB = 1 << 20

// fakeDisk is a filesystem whose free space and errors the test sets, and
// which counts how often it was asked.
type fakeDisk struct {
	free  atomic.Int64
	err   atomic.Pointer[error]
	calls atomic.Int64
}

func (d *fakeDisk) statfs(string) (int64, error) {
	d.calls.Add(1)
	if e := d.err.Load(); e != nil {
		return 0, *e
	}
	return d.free.Load(), nil
}

func newGuard(t *testing.T, free, reserve int64) (*Guard, *fakeDisk, *clock.Fake) {
	t.Helper()
	d := &fakeDisk{}
	d.free.Store(free)
	c := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	g, err := New(t.TempDir(), Options{Reserve: reserve, ReserveName: "store.min-free", Statfs: d.statfs, Clock: c})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g, d, c
}

func TestCheckAgainstReserve(t *testing.T) {
	for _, tc := range []struct {
		name          string
		free, reserve int64
		statErr       error
		want          error // nil, ErrLow or ErrUnusable
		inMessage     []string
	}{
		{name: "plenty", free: 10 << 30, reserve: 256 * MiB},
		{name: "exactly the reserve", free: 256 * MiB, reserve: 256 * MiB},
		{name: "one byte short", free: 256*MiB - 1, reserve: 256 * MiB, want: ErrLow,
			inMessage: []string{"256.0MiB", "store.min-free", "refused"}},
		{name: "full", free: 0, reserve: 256 * MiB, want: ErrLow, inMessage: []string{"0B free"}},
		{name: "reserve off", free: 0, reserve: 0},
		{name: "unknown free space", free: -1, reserve: 256 * MiB},
		{name: "statfs fails", free: 10 << 30, reserve: 256 * MiB, statErr: syscall.EIO, want: ErrUnusable,
			inMessage: []string{"cannot be written", "input/output error"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, d, _ := newGuard(t, tc.free, tc.reserve)
			if tc.statErr != nil {
				d.err.Store(&tc.statErr)
				g.SetReserve(tc.reserve) // take a reading with the error
			}
			err := g.Check()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
				if !g.Status().Writable() {
					t.Fatalf("Status %+v not writable", g.Status())
				}
				return
			}
			var de *Error
			if !errors.As(err, &de) || !errors.Is(err, tc.want) {
				t.Fatalf("Check = %v, want an *Error matching %v", err, tc.want)
			}
			msg := err.Error()
			if !strings.Contains(msg, g.Dir()) {
				t.Errorf("message %q does not name the directory %s", msg, g.Dir())
			}
			for _, s := range tc.inMessage {
				if !strings.Contains(msg, s) {
					t.Errorf("message %q does not say %q", msg, s)
				}
			}
			if g.Status().Writable() {
				t.Errorf("Status %+v says writable", g.Status())
			}
		})
	}
}

func TestReadingIsCachedUntilStaleOrHalfTheHeadroomIsWritten(t *testing.T) {
	g, d, c := newGuard(t, 1000*MiB, 200*MiB) // headroom 800MiB: a new reading after 400MiB on disk
	base := d.calls.Load()
	for range 1000 {
		if err := g.Check(); err != nil {
			t.Fatal(err)
		}
		g.Wrote(100) // 200 bytes on disk each
	}
	if n := d.calls.Load() - base; n != 0 {
		t.Fatalf("%d statfs calls for 1000 small writes within MaxAge, want 0", n)
	}
	c.Advance(DefaultMaxAge)
	g.Check()
	if n := d.calls.Load() - base; n != 1 {
		t.Fatalf("%d statfs calls after MaxAge, want 1", n)
	}
	g.Wrote(200 * MiB) // 400MiB on disk: half the headroom
	g.Check()
	if n := d.calls.Load() - base; n != 2 {
		t.Fatalf("%d statfs calls after writing half the headroom, want 2", n)
	}
}

func TestOwnWritesCountBeforeTheNextReading(t *testing.T) {
	// The filesystem does not report our writes yet (the fake's free space
	// stays), but the Guard counts them: a host writing fast stops at the
	// reserve without waiting for a reading.
	g, d, _ := newGuard(t, 300*MiB, 256*MiB)
	g.Wrote(10 * MiB) // 20MiB on disk: 280MiB left
	if err := g.Check(); err != nil {
		t.Fatalf("Check with 280MiB left = %v", err)
	}
	g.Wrote(15 * MiB) // 30MiB more: past half the headroom, so a reading is taken
	d.free.Store(250 * MiB)
	if err := g.Check(); !errors.Is(err, ErrLow) {
		t.Fatalf("Check after writing past the reserve = %v, want ErrLow", err)
	}
}

func TestWritesResumeWhenSpaceReturns(t *testing.T) {
	g, d, c := newGuard(t, 10*MiB, 256*MiB)
	if err := g.Check(); !errors.Is(err, ErrLow) {
		t.Fatalf("Check = %v, want ErrLow", err)
	}
	base := d.calls.Load()
	for range 100 {
		g.Check() // refused checks do not read the disk again before MaxAge
	}
	if n := d.calls.Load() - base; n != 0 {
		t.Fatalf("%d statfs calls for refused checks within MaxAge, want 0", n)
	}
	d.free.Store(1 << 30)
	c.Advance(DefaultMaxAge)
	if err := g.Check(); err != nil {
		t.Fatalf("Check after space returned = %v", err)
	}
}

func TestSetReserveAppliesAtOnce(t *testing.T) {
	g, _, _ := newGuard(t, 100*MiB, 1*MiB)
	g.SetReserve(1 << 40)
	if err := g.Check(); !errors.Is(err, ErrLow) {
		t.Fatalf("Check after raising the reserve = %v, want ErrLow", err)
	}
	g.SetReserve(1 * MiB)
	if err := g.Check(); err != nil {
		t.Fatalf("Check after lowering the reserve = %v", err)
	}
}

func TestRemovedOrReplacedDirectoryIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		change  func(dir string) error
		message string
	}{
		{"removed", os.RemoveAll, "no such file or directory"},
		{"replaced", func(dir string) error {
			if err := os.RemoveAll(dir); err != nil {
				return err
			}
			return os.Mkdir(dir, 0o755)
		}, "replaced by another directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, _, c := newGuard(t, 1<<30, MiB)
			store := filepath.Join(g.Dir(), "events")
			if err := os.Mkdir(store, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := g.Watch(store); err != nil {
				t.Fatal(err)
			}
			if err := tc.change(store); err != nil {
				t.Fatal(err)
			}
			c.Advance(DefaultMaxAge)
			err := g.Check()
			if !errors.Is(err, ErrUnusable) || !strings.Contains(err.Error(), tc.message) || !strings.Contains(err.Error(), store) {
				t.Fatalf("Check = %v, want ErrUnusable naming %s and saying %q", err, store, tc.message)
			}
		})
	}
}

func TestRealFilesystem(t *testing.T) {
	dir := t.TempDir()
	g, err := New(dir, Options{Reserve: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if st := g.Status(); st.Free <= 0 || !st.Writable() {
		t.Fatalf("Status of %s = %+v, want some free space", dir, st)
	}
	g.SetReserve(1 << 62)
	if err := g.Check(); !errors.Is(err, ErrLow) {
		t.Fatalf("Check with a reserve larger than any disk = %v, want ErrLow", err)
	}
	if _, err := New(filepath.Join(dir, "missing"), Options{}); err == nil {
		t.Fatal("New on a missing directory succeeded")
	}
}

func TestNilGuardAllows(t *testing.T) {
	var g *Guard
	g.Wrote(1)
	g.SetReserve(1)
	if err := g.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestFormatBytes(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{{-1, "unknown"}, {0, "0B"}, {1023, "1023B"}, {1024, "1.0KiB"}, {256 * MiB, "256.0MiB"}, {3 << 29, "1.5GiB"}} {
		if got := FormatBytes(tc.n); got != tc.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
