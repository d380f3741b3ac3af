package jetstream_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/ledger/jetstream"
	"github.com/dgraph-io/badger/v4"
	njs "github.com/nats-io/nats.go/jetstream"
)

// TestStreamLayout: a stream recorded with a layout this host does not
// read is refused at Open with an error naming it, and left as it is; one
// of this layout, or of none (created before layouts were recorded), opens,
// and is then recorded with this one.
func TestStreamLayout(t *testing.T) {
	nc := connect(t, natstest.RunServer(t).URL())
	js, err := njs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		layout string // "": no metadata
		refuse bool
	}{
		{"newer", "2", true},
		{"not-a-layout", "v1", true},
		{"zero", "0", true},
		{"current", "1", false},
		{"unrecorded", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := optionsFor(t.Name(), 1)
			o.Dir = t.TempDir()
			cfg := njs.StreamConfig{Name: o.Stream, Subjects: []string{o.Subject}}
			if tc.layout != "" {
				cfg.Metadata = map[string]string{"berth-ledger-layout": tc.layout}
			}
			if _, err := js.CreateStream(context.Background(), cfg); err != nil {
				t.Fatal(err)
			}
			s, err := jetstream.Open(context.Background(), nc, o)
			meta := streamOf(t, nc, o.Stream).CachedInfo().Config.Metadata
			if tc.refuse {
				if err == nil {
					closeStore(t, s)
				}
				if !errors.Is(err, jetstream.ErrLayout) || !strings.Contains(err.Error(), `layout "`+tc.layout+`"`) ||
					!strings.Contains(err.Error(), o.Stream) {
					t.Fatalf("open: %v, want ErrLayout naming the stream and its layout %q", err, tc.layout)
				}
				if meta["berth-ledger-layout"] != tc.layout {
					t.Errorf("the refused stream's layout is now %q", meta["berth-ledger-layout"])
				}
				return
			}
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			increment(t, s)
			expectCount(t, s, "the opened stream", 1)
			closeStore(t, s)
			if meta["berth-ledger-layout"] != "1" {
				t.Errorf("the stream's layout is %q after Open, want 1", meta["berth-ledger-layout"])
			}
		})
	}
}

// TestCacheLayout: a cache of a newer layout is refused at Open with an
// error naming it, and kept; one of an older layout, of none (from before
// layouts were recorded) or of something that is no layout is rebuilt from
// the stream.
func TestCacheLayout(t *testing.T) {
	nc := connect(t, natstest.RunServer(t).URL())
	sentinel := []byte("\x00test-sentinel")
	cases := []struct {
		name   string
		layout []byte // nil: the key deleted
		refuse bool
	}{
		{"newer", []byte("2"), true},
		{"older", []byte("0"), false},
		{"unrecorded", nil, false},
		{"not-a-layout", []byte("x"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := optionsFor(t.Name(), 1)
			o.Dir = t.TempDir()
			s := open(t, nc, o)
			for range 3 {
				increment(t, s)
			}
			closeStore(t, s)
			err := jetstream.EditCache(o, func(txn *badger.Txn) error {
				if tc.layout == nil {
					return errors.Join(txn.Delete(jetstream.LayoutKey), txn.Set(sentinel, []byte("kept")))
				}
				return errors.Join(txn.Set(jetstream.LayoutKey, tc.layout), txn.Set(sentinel, []byte("kept")))
			})
			if err != nil {
				t.Fatal(err)
			}
			s, err = jetstream.Open(context.Background(), nc, o)
			if tc.refuse {
				if err == nil {
					closeStore(t, s)
				}
				if !errors.Is(err, jetstream.ErrLayout) || !strings.Contains(err.Error(), "layout "+string(tc.layout)) ||
					!strings.Contains(err.Error(), o.Dir) {
					t.Fatalf("open: %v, want ErrLayout naming the cache and its layout %s", err, tc.layout)
				}
				if v, err := jetstream.ReadCache(o, sentinel); err != nil || string(v) != "kept" {
					t.Errorf("the refused cache was changed: sentinel %q, %v", v, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			expectCount(t, s, "the rebuilt cache", 3)
			closeStore(t, s)
			if v, err := jetstream.ReadCache(o, sentinel); err != nil || v != nil {
				t.Errorf("the cache was not rebuilt: sentinel %q, %v", v, err)
			}
			if v, err := jetstream.ReadCache(o, jetstream.LayoutKey); err != nil || string(v) != "1" {
				t.Errorf("the rebuilt cache's layout %q, %v; want 1", v, err)
			}
		})
	}
}

// TestMessageLayout: a transaction message of a format this host does not
// read stops the cache (a host cannot decide it as the others do), and
// every later transaction fails with ErrLayout naming it.
func TestMessageLayout(t *testing.T) {
	nc := connect(t, natstest.RunServer(t).URL())
	o := optionsFor(t.Name(), 1)
	o.Dir = t.TempDir()
	s := open(t, nc, o)
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	increment(t, s)
	js, err := njs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(context.Background(), o.Subject, []byte{9, 1, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	err = s.View(context.Background(), func(ledger.Tx) error { return nil })
	if !errors.Is(err, jetstream.ErrLayout) || !strings.Contains(err.Error(), "format 9") {
		t.Fatalf("view after a message of format 9: %v, want ErrLayout naming it", err)
	}
	if err := s.Update(context.Background(), incrementFn); !errors.Is(err, jetstream.ErrLayout) {
		t.Fatalf("update after a message of format 9: %v, want ErrLayout", err)
	}
}

// TestSnapshotLayout: a host that must restore a snapshot of a newer
// layout (the stream was compacted by a newer host) refuses to open, with
// ErrLayout naming it.
func TestSnapshotLayout(t *testing.T) {
	nc := connect(t, natstest.RunServer(t).URL())
	o := compacting(t, 1, -1, 1)
	s := open(t, nc, o)
	for range 3 {
		increment(t, s)
	}
	if err := s.Compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	closeStore(t, s)
	js, err := njs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	obs, err := js.ObjectStore(context.Background(), o.Stream+"_SNAPSHOTS")
	if err != nil {
		t.Fatal(err)
	}
	infos, err := obs.List(context.Background())
	if err != nil || len(infos) != 1 {
		t.Fatalf("snapshots: %v, %v; want one", infos, err)
	}
	meta := infos[0].ObjectMeta
	meta.Metadata["layout"] = "2"
	if err := obs.UpdateMeta(context.Background(), meta.Name, meta); err != nil {
		t.Fatal(err)
	}
	fresh := o
	fresh.Dir = t.TempDir()
	s, err = jetstream.Open(context.Background(), nc, fresh)
	if err == nil {
		closeStore(t, s)
	}
	if !errors.Is(err, jetstream.ErrLayout) || !strings.Contains(err.Error(), `layout "2"`) || !strings.Contains(err.Error(), "_SNAPSHOTS") {
		t.Fatalf("open on a snapshot of layout 2: %v, want ErrLayout naming it", err)
	}
}
