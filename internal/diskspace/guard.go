// Package diskspace keeps the host's stores off a full disk. A Guard watches
// the free space of the filesystem that holds the data directory and refuses
// writes while it is below a reserve, the way etcd's backend quota and NATS
// JetStream's store limits refuse a write rather than let the store fail in
// the middle of one. Badger writes through memory-mapped files (its memtable
// is a sparse file twice the memtable size): a write into a mapped page the
// filesystem cannot back kills the process with SIGBUS, and after a restart
// on the same full disk it dies again. Refusing early turns that crash loop
// into answers a client can act on (507 Insufficient Storage) while reads go
// on.
//
// The stores ask the Guard before each write ([Guard.Check]) and tell it
// what they wrote ([Guard.Wrote]); the API maps the [*Error] it returns to
// 507, or 503 when the data directory itself is gone. The Guard also notices
// a data directory removed (or replaced) under the running host: Badger
// keeps writing into its open files, whose data would vanish with them, so
// such writes are refused too.
package diskspace

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/internal/clock"
)

// Errors an [*Error] matches with errors.Is.
var (
	// ErrLow: the free space is below the reserve.
	ErrLow = errors.New("diskspace: free space below the reserve")
	// ErrUnusable: the data directory cannot be checked or was removed or
	// replaced under the running host.
	ErrUnusable = errors.New("diskspace: data directory unusable")
)

// DefaultMaxAge is how long a free-space reading is trusted when the stores
// write little; see [Guard] for why.
const DefaultMaxAge = 500 * time.Millisecond

// writeAmplification is how many bytes of disk a byte a store writes takes
// before Badger can drop any of it: once in the write-ahead log (the
// memtable file), once more in the table the memtable is flushed to.
const writeAmplification = 2

// Options configure a Guard.
type Options struct {
	// Reserve is the free space, in bytes, below which writes are refused.
	// 0 turns the reserve off (a removed data directory is still refused).
	Reserve int64
	// ReserveName is the name of the setting, for messages (e.g.
	// "store.min-free"). Default "the reserve".
	ReserveName string
	// MaxAge is how long a reading is trusted at most. Default DefaultMaxAge.
	MaxAge time.Duration
	// Clock tells the age of a reading (default clock.Real()); tests
	// drive it.
	Clock clock.Clock
	// Statfs returns the bytes available on dir's filesystem, or -1 when the
	// platform cannot tell (default: statfs(2)); tests inject low space and
	// errors with it.
	Statfs func(dir string) (int64, error)
	// Logger is told when writes start and stop being refused. Default: none.
	Logger *slog.Logger
}

// Guard is the host's one owner of "may the stores write": it caches a
// reading of the free space and refreshes it when it is older than MaxAge
// or when the stores have written half the headroom (free space less the
// reserve) since it was taken, whichever comes first. So Check is an atomic
// load, a clock read and a compare on the path of every write: statfs(2) is
// cheap, but not free, and an append path that already fsyncs its batches
// does not need it on every call. The byte bound is what makes the cache
// safe: however fast the host writes, it cannot pass the reserve by more
// than it has written since the last reading, and that is counted against
// the reading (Check compares free space less the bytes written since), so
// the host's own writes are never missed; the time bound catches what other
// processes write to the same filesystem, and notices space coming back.
// While writes are refused only the time bound applies, so a flood of
// refused requests costs one statfs per MaxAge.
//
// A nil *Guard allows everything. It is safe for concurrent use.
type Guard struct {
	dir    string
	opts   Options
	statfs func(string) (int64, error)
	clock  clock.Clock

	reserve atomic.Int64
	// written counts bytes written since the current reading was taken.
	written atomic.Int64
	cur     atomic.Pointer[reading]

	// mu serialises readings and the watched directories.
	mu      sync.Mutex
	watched []watched
}

// watched is a directory the Guard holds open: while it does, the
// directory's inode cannot be reused, so a directory removed and made again
// under the same name is told apart from the one the host opened.
type watched struct {
	dir string
	f   *os.File
}

// reading is one statfs and the budget of bytes the stores may write before
// the next.
type reading struct {
	Status
	budget int64
}

// New returns a Guard on dir, which must exist, with a first reading taken.
func New(dir string, opts Options) (*Guard, error) {
	if opts.MaxAge <= 0 {
		opts.MaxAge = DefaultMaxAge
	}
	if opts.ReserveName == "" {
		opts.ReserveName = "the reserve"
	}
	g := &Guard{dir: dir, opts: opts, statfs: opts.Statfs, clock: opts.Clock}
	if g.statfs == nil {
		g.statfs = statfs
	}
	if g.clock == nil {
		g.clock = clock.Real()
	}
	g.reserve.Store(max(opts.Reserve, 0))
	if err := g.Watch(dir); err != nil {
		return nil, err
	}
	return g, nil
}

// Dir returns the directory the Guard reads the free space of.
func (g *Guard) Dir() string { return g.dir }

// Watch adds a directory (a store's own, once it exists) that must stay the
// one it is now: removed or replaced, writes are refused. It takes a reading.
func (g *Guard) Watch(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("diskspace: %w", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.watched = append(g.watched, watched{dir: dir, f: f})
	g.readLocked()
	return nil
}

// Close releases the watched directories. Check goes on answering from the
// last reading.
func (g *Guard) Close() error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var errs []error
	for _, w := range g.watched {
		errs = append(errs, w.f.Close())
	}
	g.watched = nil
	return errors.Join(errs...)
}

// SetReserve changes the reserve (a config reload) and takes a reading, so
// the next Check answers by the new reserve.
func (g *Guard) SetReserve(n int64) {
	if g == nil {
		return
	}
	g.reserve.Store(max(n, 0))
	g.mu.Lock()
	defer g.mu.Unlock()
	g.readLocked()
}

// Check reports whether a write may go ahead: nil, or an [*Error] saying
// why not.
func (g *Guard) Check() error {
	if g == nil {
		return nil
	}
	r := g.current()
	return r.problem(g.written.Load(), g.opts.ReserveName)
}

// Wrote tells the Guard a store wrote n bytes (keys and values).
func (g *Guard) Wrote(n int64) {
	if g == nil || n <= 0 {
		return
	}
	g.written.Add(n * writeAmplification)
}

// Status returns the current reading (refreshed if it is stale), for health
// reports.
func (g *Guard) Status() Status {
	if g == nil {
		return Status{Free: -1}
	}
	r := g.current()
	s := r.Status
	if s.Free >= 0 {
		s.Free = max(s.Free-g.written.Load(), 0)
	}
	return s
}

// current returns the reading, taking a new one when it is stale. A caller
// that finds another taking one uses the old: it is at most one refresh late.
func (g *Guard) current() *reading {
	r := g.cur.Load()
	if g.clock.Now().Sub(r.Checked) < g.opts.MaxAge && g.written.Load() < r.budget {
		return r
	}
	if !g.mu.TryLock() {
		return r
	}
	defer g.mu.Unlock()
	return g.readLocked()
}

// readLocked takes a reading; g.mu held.
func (g *Guard) readLocked() *reading {
	prev := g.cur.Load()
	// Bytes written from here on count against the new reading, which may
	// or may not see them: counting them twice errs on the safe side.
	g.written.Store(0)
	r := &reading{Status: Status{Dir: g.dir, Reserve: g.reserve.Load(), Checked: g.clock.Now()}}
	free, err := g.statfs(g.dir)
	switch {
	case err != nil:
		r.Free, r.Err = -1, fmt.Errorf("statfs: %w", err)
	default:
		r.Free, r.Err = free, g.checkWatchedLocked()
	}
	r.budget = math.MaxInt64 // while refused (or unknown), only the clock refreshes
	if r.Err == nil && r.Free >= 0 && r.Free >= r.Reserve {
		r.budget = (r.Free - r.Reserve) / 2
	}
	g.cur.Store(r)
	g.logChange(prev, r)
	return r
}

// checkWatchedLocked finds a watched directory removed or replaced.
func (g *Guard) checkWatchedLocked() error {
	for _, w := range g.watched {
		fi, err := os.Stat(w.dir)
		if err != nil {
			return err
		}
		held, err := w.f.Stat()
		switch {
		case err != nil:
			return err
		case !os.SameFile(held, fi):
			return fmt.Errorf("%s was replaced by another directory while the host was running", w.dir)
		}
	}
	return nil
}

func (g *Guard) logChange(prev, r *reading) {
	if g.opts.Logger == nil || prev == nil {
		return // the first reading: the host says what it makes of it at start
	}
	was := prev != nil && prev.problem(0, g.opts.ReserveName) != nil
	wasUnusable := prev != nil && prev.Err != nil
	err := r.problem(0, g.opts.ReserveName)
	switch {
	case err != nil && (!was || wasUnusable != (r.Err != nil)):
		g.opts.Logger.Error("writes are refused", "error", err)
	case err == nil && was:
		g.opts.Logger.Info("writes are allowed again", "dir", g.dir, "free", FormatBytes(r.Free), "reserve", FormatBytes(r.Reserve))
	}
}

// problem is the error of a write against r with written bytes since it.
func (r *reading) problem(written int64, name string) error {
	switch {
	case r.Err != nil:
		return &Error{Dir: r.Dir, Free: -1, Reserve: r.Reserve, ReserveName: name, Err: r.Err}
	case r.Free < 0:
		return nil // unknown: nothing to enforce
	case r.Free-written < r.Reserve:
		return &Error{Dir: r.Dir, Free: max(r.Free-written, 0), Reserve: r.Reserve, ReserveName: name}
	}
	return nil
}

// Status is a reading of the data directory's free space.
type Status struct {
	Dir     string
	Free    int64 // bytes available (less what was written since the reading); -1: unknown
	Reserve int64
	// Err is why the data directory cannot be used (removed, replaced,
	// unreadable); Free is -1 then.
	Err     error
	Checked time.Time
}

// Low reports whether the free space is below the reserve.
func (s Status) Low() bool { return s.Err == nil && s.Free >= 0 && s.Free < s.Reserve }

// Writable reports whether writes are allowed.
func (s Status) Writable() bool { return s.Err == nil && !s.Low() }

// Error is a write refused by the Guard.
type Error struct {
	Dir         string
	Free        int64 // -1 when unknown (Err set)
	Reserve     int64
	ReserveName string // the setting, e.g. "store.min-free"
	// Err, when set, is why the directory cannot be used at all.
	Err error
}

// Error says what was refused and why, naming the directory, the free space
// and the reserve.
func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("the data directory %s cannot be written: %v", e.Dir, e.Err)
	}
	return fmt.Sprintf("the data directory %s has %s free, below the reserve of %s (%s); writes are refused until space is freed or the reserve lowered",
		e.Dir, FormatBytes(e.Free), FormatBytes(e.Reserve), e.ReserveName)
}

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// Is matches ErrLow or ErrUnusable.
func (e *Error) Is(target error) bool {
	return target == ErrLow && e.Err == nil || target == ErrUnusable && e.Err != nil
}

// FormatBytes writes n with a 1024-based unit and one decimal ("1.5GiB",
// "512.0MiB", "100B").
func FormatBytes(n int64) string {
	if n < 0 {
		return "unknown"
	}
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v, i := float64(n)/unit, 0
	for v >= unit && i < len(units)-1 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f%s", v, units[i])
}
