package subscription

import (
	"context"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
)

// idsIn returns n aggregate ids (of type Order) that hash to partition p of
// parts.
func idsIn(p, parts, n int, prefix string) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		id := fmt.Sprint(prefix, i)
		if eventlog.PartitionOf("Order", id, parts) == p {
			out = append(out, id)
		}
	}
	return out
}

// partitionCheckpoints returns the stored checkpoint of each of n
// partitions (0 for none), the subscription's, and the stored partition
// count.
func (e *env) partitionCheckpoints(n int) (parts []uint64, subCp uint64, count string) {
	e.t.Helper()
	parts = make([]uint64, n)
	if err := e.store.View(context.Background(), func(tx ledger.Tx) error {
		for i := range n {
			var err error
			if parts[i], _, err = tx.PartitionCheckpoint(sub, i); err != nil {
				return err
			}
		}
		var err error
		if subCp, _, err = tx.Checkpoint(sub); err != nil {
			return err
		}
		v, err := tx.Meta(sub, metaPartitions)
		count = string(v)
		if err == ledger.ErrNotFound || err != nil && count == "" {
			err = nil
		}
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return parts, subCp, count
}

// Each partition stores its own checkpoint, and a restart takes each
// partition from its own: an aggregate stuck in one partition (its handler
// blocks) holds back that partition's checkpoint alone, so after a crash
// only that partition's commits from the stuck one on are delivered again,
// and none of the other partitions'.
func TestPartitionCheckpointsSurviveACrash(t *testing.T) {
	clock := clock.NewFake(t0)
	const parts = 4
	stuck := idsIn(2, parts, 1, "s")[0]
	release := make(chan struct{})
	rec := newRecorder(clock, nil)
	inv := InvokerFunc(func(ctx context.Context, d Delivery) *retry.Failure {
		if d.Commit.AggregateID == stuck && d.Commit.Version == 2 {
			select {
			case <-release:
			case <-ctx.Done():
				return &retry.Failure{Classes: []string{retry.ClassCanceled}, Message: "cancelled"}
			}
		}
		return rec.Invoke(ctx, d)
	})
	spec := spec(sub, inv)
	spec.OverrideRetry = retry.Settings{Timeout: time.Hour}
	e := newEnv(t, Options{Partitions: parts, CheckpointEvery: 1}, spec)
	e.clock = clock
	e.start()
	e.append("Order", stuck) // position 1, handled
	e.append("Order", stuck) // position 2: its handler blocks
	others := map[int][]string{}
	for p := range parts {
		if p != 2 {
			others[p] = idsIn(p, parts, 3, "o")
		}
	}
	for v := range 2 {
		_ = v
		for p := range parts {
			for _, id := range others[p] {
				e.append("Order", id)
			}
		}
	}
	for _, ids := range others {
		for _, id := range ids {
			rec.waitHandled(t, id, 2)
		}
	}
	head := uint64(2 + 2*3*(parts-1))
	var cps []uint64
	checkfor.Eventually(t, func() error {
		cps, _, _ = e.partitionCheckpoints(parts)
		for p, cp := range cps {
			if p != 2 && cp != head+1 || p == 2 && cp != 2 {
				return fmt.Errorf("partition checkpoints %v, want %d but partition 2's at 2", cps, head+1)
			}
		}
		return nil
	})
	st := e.status(sub)
	if st.Checkpoint != 2 || len(st.Partitions) != parts || st.Partitions[2].Checkpoint != 2 || st.Partitions[1].Checkpoint != head+1 {
		t.Fatalf("status checkpoint %d, partitions %+v", st.Checkpoint, st.Partitions)
	}
	before := len(rec.all())
	e.crash()
	close(release)
	rec.waitHandled(t, stuck, 2)
	e.append("Order", others[1][0])
	rec.waitHandled(t, others[1][0], 3)
	e.waitIdle(sub)
	var again []string
	for _, c := range rec.all()[before:] {
		again = append(again, c.Agg+"@"+strconv.FormatUint(c.Version, 10))
	}
	// The crash cancelled the blocked attempt, which was never recorded.
	slices.Sort(again)
	if want := []string{others[1][0] + "@3", stuck + "@2"}; !slices.Equal(again, want) {
		t.Fatalf("delivered after the crash %v, want only %v", again, want)
	}
	if got := rec.handled(stuck); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("%s handled %v", stuck, got)
	}
}

// A ledger written before partitions kept checkpoints has only the
// subscription's: every partition starts from it, and the partition count
// is stored at the first start.
func TestUpgradeFromSubscriptionCheckpoint(t *testing.T) {
	clock := clock.NewFake(t0)
	rec := newRecorder(clock, nil)
	const parts = 3
	e := newEnv(t, Options{Partitions: parts}, spec(sub, rec))
	e.clock = clock
	for a := range 6 {
		e.append("Order", fmt.Sprint("u", a)) // positions 1..6, handled by the old host
	}
	if err := e.store.Update(context.Background(), func(tx ledger.Tx) error {
		return tx.SetCheckpoint(sub, 7)
	}); err != nil {
		t.Fatal(err)
	}
	for a := range 6 {
		e.append("Order", fmt.Sprint("u", a)) // positions 7..12, version 2 of each
	}
	e.start()
	e.waitIdle(sub)
	for a := range 6 {
		id := fmt.Sprint("u", a)
		if got := rec.handled(id); !slices.Equal(got, []uint64{2}) {
			t.Fatalf("%s handled %v, want only version 2 (after the stored checkpoint)", id, got)
		}
	}
	e.restart()
	cps, subCp, count := e.partitionCheckpoints(parts)
	if !slices.Equal(cps, []uint64{13, 13, 13}) || subCp != 13 || count != strconv.Itoa(parts) {
		t.Fatalf("stored partition checkpoints %v, subscription's %d, count %q", cps, subCp, count)
	}
}

// Starting with another partition count than the checkpoints were written
// for moves every aggregate's partition, so every partition starts from the
// lowest stored partition checkpoint: what came after it is delivered
// again, nothing is lost, each aggregate in order; the new count is stored.
func TestChangingThePartitionCountRedeliversAndLosesNothing(t *testing.T) {
	clock := clock.NewFake(t0)
	rec := newRecorder(clock, nil)
	e := newEnv(t, Options{Partitions: 4}, spec(sub, rec))
	e.clock = clock
	const aggs, versions = 8, 3
	for range versions {
		for a := range aggs {
			e.append("Order", fmt.Sprint("r", a))
		}
	}
	// A host with 4 partitions got that far in each (positions 1..24).
	if err := e.store.Update(context.Background(), func(tx ledger.Tx) error {
		for p, cp := range []uint64{20, 9, 25, 14} {
			if err := tx.SetPartitionCheckpoint(sub, p, cp); err != nil {
				return err
			}
		}
		if err := tx.SetCheckpoint(sub, 9); err != nil {
			return err
		}
		return tx.SetMeta(sub, metaPartitions, []byte("4"))
	}); err != nil {
		t.Fatal(err)
	}
	e.opts.Partitions = 3
	e.start()
	e.waitIdle(sub)
	for a := range aggs {
		id := fmt.Sprint("r", a)
		var want []uint64
		for v := uint64(1); v <= versions; v++ {
			if pos := (v-1)*aggs + uint64(a) + 1; pos >= 9 {
				want = append(want, v)
			}
		}
		if got := rec.handled(id); !slices.Equal(got, want) {
			t.Fatalf("%s handled %v, want %v: every commit from the lowest partition checkpoint (9) on", id, got, want)
		}
	}
	e.restart()
	cps, subCp, count := e.partitionCheckpoints(4)
	if !slices.Equal(cps[:3], []uint64{25, 25, 25}) || subCp != 25 || count != "3" {
		t.Fatalf("stored partition checkpoints %v, subscription's %d, count %q", cps, subCp, count)
	}
}

// Reset sets the checkpoint of every partition.
func TestResetSetsEveryPartitionCheckpoint(t *testing.T) {
	clock := clock.NewFake(t0)
	rec := newRecorder(clock, nil)
	e := newEnv(t, Options{Partitions: 3}, spec(sub, rec))
	e.clock = clock
	for a := range 6 {
		e.append("Order", fmt.Sprint("x", a))
	}
	e.start()
	e.waitIdle(sub)
	e.restart()
	if err := e.eng.Reset(context.Background(), sub, 4, Caller{}); err != nil {
		t.Fatal(err)
	}
	e.waitIdle(sub)
	if n := len(rec.all()); n != 6+3 {
		t.Fatalf("%d calls, want 6 and the 3 from position 4 again", n)
	}
	e.restart()
	cps, subCp, _ := e.partitionCheckpoints(3)
	if !slices.Equal(cps, []uint64{7, 7, 7}) || subCp != 7 {
		t.Fatalf("stored partition checkpoints %v, subscription's %d", cps, subCp)
	}
}
