// Package jetstream keeps Berth's modules and their versions in a NATS
// JetStream object store, shared by every host of a deployment: an upload on
// any host is stored once, and every other host learns of it from Watch and
// deploys it too. It implements registry.ModuleStore and registry.Watcher.
//
// Objects: "v/<name>/<version>" holds a version's bytes, its
// registry.StoredModule as JSON in the object's metadata; "c/<name>" holds
// the StoredModule of the module's current version (deleting it removes the
// module; its versions stay). A version is stored before it becomes current,
// so a host that dies in between leaves the old current one.
//
// Version numbers are claimed in a KV bucket beside it, "<bucket>_VERSIONS",
// one key "<name>.<version>" created once: two hosts taking an upload of the
// same module at the same moment both count the same next number, and only
// one may have it (the other's Store fails with registry.ErrVersionTaken and
// the registry numbers again) — else both would write one version object,
// and the current one could name one upload's hash over the other's bytes.
package jetstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berthhq/berth/internal/jsapi"
	"github.com/berthhq/berth/registry"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Options configure a Store. Zero values are defaults.
type Options struct {
	// Bucket is the object store's name (default "BERTH_MODULES").
	Bucket string
	// Replicas of the bucket: 1 or 3 (default 1).
	Replicas int
	// Timeout bounds each request of opening the bucket (default
	// DefaultTimeout); a request the cluster cannot answer yet (one
	// forming, or another host creating the same bucket) is tried again
	// until Open's context ends (for jsapi.DefaultWait without a deadline).
	Timeout time.Duration
}

// DefaultTimeout is Options.Timeout when left 0 (the host passes
// store.jetstream.connect-timeout instead).
const DefaultTimeout = 10 * time.Second

// Store is the module store in a JetStream object store. Each of its
// requests is asked again while NATS cannot answer it (jsapi.Ask: a leader
// election, a loaded server that answers an upload "nats: timeout") within
// ctx, a REST write's deadline, each try bounded by Options.Timeout. Every
// request asked that way is safe to send twice: a put of the same object replaces it, a get reads.
type Store struct {
	obj    jetstream.ObjectStore
	claims jetstream.KeyValue // version numbers taken, "<name>.<version>"
	// timeout bounds each try of a request (Options.Timeout).
	timeout time.Duration

	// recent are this Store's last writes, which its lists wait (briefly)
	// to see: a list can lag a write just made on an R3 stream.
	mu     sync.Mutex
	recent []recentWrite
}

// recentWrite is an object this Store put (gone false) or deleted.
type recentWrite struct {
	name string
	gone bool
}

// maxRecent is how many of its last writes a Store's lists wait to see.
const maxRecent = 16

// wrote records a write of this Store's for its next lists.
func (s *Store) wrote(name string, gone bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recent = slices.DeleteFunc(s.recent, func(w recentWrite) bool { return w.name == name })
	s.recent = append(s.recent, recentWrite{name: name, gone: gone})
	if len(s.recent) > maxRecent {
		s.recent = s.recent[len(s.recent)-maxRecent:]
	}
}

// shows reports whether a list of prefix shows every recent write under it.
func (s *Store) shows(prefix string, all []*jetstream.ObjectInfo) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.recent {
		if !strings.HasPrefix(w.name, prefix) {
			continue
		}
		there := slices.ContainsFunc(all, func(o *jetstream.ObjectInfo) bool { return o.Name == w.name && !o.Deleted })
		if there == w.gone {
			return false
		}
	}
	return true
}

var (
	_ registry.ModuleStore = (*Store)(nil)
	_ registry.Watcher     = (*Store)(nil)
)

// metaKey is the object metadata key holding a version's StoredModule.
const metaKey = "berth-module"

// Open opens (creating if needed) the bucket on nc, and waits until its
// stream has a leader.
func Open(ctx context.Context, nc *nats.Conn, opts Options) (*Store, error) {
	if opts.Bucket == "" {
		opts.Bucket = "BERTH_MODULES"
	}
	if opts.Replicas == 0 {
		opts.Replicas = 1
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("modules: jetstream: %w", err)
	}
	// Each is a stream (OBJ_<bucket>, KV_<bucket>) whose first write would
	// find no leader to answer it without the wait.
	obj, err := jsapi.Ensure(ctx, js, "OBJ_"+opts.Bucket, opts.Timeout, func(ctx context.Context) (jetstream.ObjectStore, error) {
		return js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: opts.Bucket, Replicas: opts.Replicas,
			Description: "Berth modules and their versions"})
	})
	if err != nil {
		return nil, fmt.Errorf("modules: object store %s: %w", opts.Bucket, err)
	}
	claims, err := jsapi.Ensure(ctx, js, "KV_"+claimsBucket(opts.Bucket), opts.Timeout, func(ctx context.Context) (jetstream.KeyValue, error) {
		return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: claimsBucket(opts.Bucket), Replicas: opts.Replicas,
			Description: "Berth module version numbers taken, one key each"})
	})
	if err != nil {
		return nil, fmt.Errorf("modules: version claims %s: %w", claimsBucket(opts.Bucket), err)
	}
	return &Store{obj: obj, claims: claims, timeout: opts.Timeout}, nil
}

// claimsBucket names the KV bucket of the version claims of the object
// store bucket.
func claimsBucket(bucket string) string { return bucket + "_VERSIONS" }

// claim takes version v of name for this upload: registry.ErrVersionTaken
// when another upload has it.
func (s *Store) claim(ctx context.Context, name string, v int) error {
	// Asked again while the bucket's stream cannot answer (a new R3 bucket
	// said "no response from stream" once). A claim whose answer was lost
	// then finds its own key and takes the next number: a gap, never a
	// number given twice.
	_, err := jsapi.Ask(ctx, s.timeout, func(ctx context.Context) (uint64, error) {
		return s.claims.Create(ctx, name+"."+strconv.Itoa(v), nil)
	})
	if errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("modules: %s v%d: %w", name, v, registry.ErrVersionTaken)
	}
	if err != nil {
		return fmt.Errorf("modules: claim %s v%d: %w", name, v, err)
	}
	return nil
}

func versionName(name string, v int) string { return "v/" + name + "/" + strconv.Itoa(v) }
func currentName(name string) string        { return "c/" + name }

// Store claims the version number, keeps the version, makes it current,
// and removes the oldest beyond keep. registry.ErrVersionTaken when another
// host's upload has the number.
func (s *Store) Store(ctx context.Context, m registry.StoredModule, wasm []byte, keep int) error {
	meta, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := s.claim(ctx, m.Name, m.Version); err != nil {
		return err
	}
	if _, err := jsapi.Ask(ctx, s.timeout, func(ctx context.Context) (*jetstream.ObjectInfo, error) {
		return s.obj.Put(ctx, jetstream.ObjectMeta{Name: versionName(m.Name, m.Version),
			Metadata: map[string]string{metaKey: string(meta)}}, bytes.NewReader(wasm))
	}); err != nil {
		return fmt.Errorf("modules: store %s v%d: %w", m.Name, m.Version, err)
	}
	s.wrote(versionName(m.Name, m.Version), false)
	if _, err := jsapi.Ask(ctx, s.timeout, func(ctx context.Context) (*jetstream.ObjectInfo, error) {
		return s.obj.PutBytes(ctx, currentName(m.Name), meta)
	}); err != nil {
		return fmt.Errorf("modules: make %s v%d current: %w", m.Name, m.Version, err)
	}
	s.wrote(currentName(m.Name), false)
	vs, err := s.Versions(ctx, m.Name)
	if err != nil {
		return err
	}
	// The list is read through a consumer that can lag the put just made
	// on an R3 stream: count the stored version in whether it shows or not,
	// or the oldest would be kept one upload too long.
	if !slices.ContainsFunc(vs, func(v registry.StoredModule) bool { return v.Version == m.Version }) {
		vs = append(vs, m)
		slices.SortFunc(vs, func(a, b registry.StoredModule) int { return a.Version - b.Version })
	}
	for len(vs) > keep {
		if err := s.delete(ctx, versionName(m.Name, vs[0].Version)); err != nil {
			return fmt.Errorf("modules: prune %s v%d: %w", m.Name, vs[0].Version, err)
		}
		s.wrote(versionName(m.Name, vs[0].Version), true)
		vs = vs[1:]
	}
	return nil
}

// delete removes the object name, asked again as the Store's requests are
// (jsapi.Ask); one already gone (an earlier try's, or another host's) is
// not an error.
func (s *Store) delete(ctx context.Context, name string) error {
	_, err := jsapi.Ask(ctx, s.timeout, func(ctx context.Context) (struct{}, error) { return struct{}{}, s.obj.Delete(ctx, name) })
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil
	}
	return err
}

// list returns the infos of the objects whose names start with prefix.
func (s *Store) list(ctx context.Context, prefix string) ([]*jetstream.ObjectInfo, error) {
	// A list reads through a consumer placed on one of the stream's
	// servers; one that is not ready never delivers, and a list without a
	// deadline would wait for ever. Each try is
	// bounded and asked again within ctx (30s when ctx has no deadline).
	// A list that does not show this Store's own last writes yet is read
	// again, for up to a second; another host's later write of the same
	// object would keep it from ever showing, so it is not waited out.
	p := jsapi.Every(listShowPause)
	p.Attempts = listShowTries
	all, err := jsapi.Retry(ctx, p, func(err error) bool { return errors.Is(err, errNotShown) },
		func(ctx context.Context) ([]*jetstream.ObjectInfo, error) {
			all, err := jsapi.Retry(ctx, jsapi.Opening(s.timeout), jsapi.Transient, func(ctx context.Context) ([]*jetstream.ObjectInfo, error) {
				all, err := s.obj.List(ctx)
				if errors.Is(err, jetstream.ErrNoObjectsFound) {
					return nil, nil
				}
				return all, err
			})
			if err == nil && !s.shows(prefix, all) {
				return all, errNotShown
			}
			return all, err
		})
	if gaveUp := (*jsapi.GaveUp)(nil); errors.Is(err, errNotShown) && errors.As(err, &gaveUp) {
		if gaveUp.Tries < listShowTries {
			return nil, ctx.Err() // ctx ended while it waited
		}
		err = nil // not shown yet after all the tries: the list as it is
	}
	if err != nil {
		return nil, fmt.Errorf("modules: list: %w", err)
	}
	var out []*jetstream.ObjectInfo
	for _, o := range all {
		if strings.HasPrefix(o.Name, prefix) && !o.Deleted {
			out = append(out, o)
		}
	}
	return out, nil
}

// A list that does not show this Store's own last writes is read again
// listShowTries times at most, listShowPause apart (about a second in all).
const (
	listShowTries = 51
	listShowPause = 20 * time.Millisecond
)

// errNotShown is a list that does not show this Store's last writes yet.
var errNotShown = errors.New("modules: the list does not show this host's last writes yet")

func (s *Store) currentOf(ctx context.Context, name string) (registry.StoredModule, bool, error) {
	b, err := jsapi.Ask(ctx, s.timeout, func(ctx context.Context) ([]byte, error) { return s.obj.GetBytes(ctx, currentName(name)) })
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return registry.StoredModule{}, false, nil
	}
	if err != nil {
		return registry.StoredModule{}, false, fmt.Errorf("modules: current %s: %w", name, err)
	}
	var m registry.StoredModule
	if err := json.Unmarshal(b, &m); err != nil {
		return registry.StoredModule{}, false, fmt.Errorf("modules: current %s: %w", name, err)
	}
	return m, true, nil
}

// Current returns every current module and its bytes.
func (s *Store) Current(ctx context.Context) ([]registry.StoredModule, [][]byte, error) {
	infos, err := s.list(ctx, "c/")
	if err != nil {
		return nil, nil, err
	}
	var metas []registry.StoredModule
	var codes [][]byte
	for _, o := range infos {
		cur, ok, err := s.currentOf(ctx, strings.TrimPrefix(o.Name, "c/"))
		if err != nil || !ok {
			if err != nil {
				return nil, nil, err
			}
			continue
		}
		_, wasm, err := s.Load(ctx, cur.Name, cur.Version)
		if err != nil {
			return nil, nil, err
		}
		metas = append(metas, cur)
		codes = append(codes, wasm)
	}
	return metas, codes, nil
}

// CurrentVersions returns every module's current version, without its
// bytes: a look cheap enough to repeat (registry.Registry.Watch does, in
// case its watch missed a change).
func (s *Store) CurrentVersions(ctx context.Context) ([]registry.StoredModule, error) {
	infos, err := s.list(ctx, "c/")
	if err != nil {
		return nil, err
	}
	var metas []registry.StoredModule
	for _, o := range infos {
		cur, ok, err := s.currentOf(ctx, strings.TrimPrefix(o.Name, "c/"))
		if err != nil {
			return nil, err
		}
		if ok {
			metas = append(metas, cur)
		}
	}
	return metas, nil
}

// CurrentVersion returns module name's current version, read from its own
// record; false when it was removed. A server may answer from behind the
// others (a direct get may be answered by any replica): a record it does
// not have at all, not even as removed, or has in another form than the
// read before showed, is read again, a few times (about 3.5 s), and then
// is an error — the module is never undeployed on such a server's word.
func (s *Store) CurrentVersion(ctx context.Context, name string) (registry.StoredModule, bool, error) {
	type current struct {
		m  registry.StoredModule
		ok bool
	}
	notYet := func(err error) bool { return jsapi.Transient(err) || errors.Is(err, errBehind) }
	c, err := jsapi.Retry(ctx, jsapi.Policy{PerTry: s.timeout, Attempts: 8}, notYet, func(ctx context.Context) (current, error) {
		m, ok, err := s.currentOf(ctx, name)
		if err != nil || ok {
			return current{m, ok}, err
		}
		info, err := s.obj.GetInfo(ctx, currentName(name), jetstream.GetObjectInfoShowDeleted())
		switch {
		case errors.Is(err, jetstream.ErrObjectNotFound):
			return current{}, fmt.Errorf("%w: no record of it, not even its removal", errBehind)
		case err != nil:
			return current{}, err
		case info.Deleted:
			return current{}, nil
		}
		return current{}, fmt.Errorf("%w: its record was not found, then found", errBehind)
	})
	if err != nil {
		return registry.StoredModule{}, false, fmt.Errorf("modules: current %s: %w", name, err)
	}
	return c.m, c.ok, nil
}

// errBehind: the server that answered is behind the others.
var errBehind = errors.New("the server that answered is behind the others")

// Load returns a kept version and its bytes.
func (s *Store) Load(ctx context.Context, name string, version int) (registry.StoredModule, []byte, error) {
	info, err := jsapi.Ask(ctx, s.timeout, func(ctx context.Context) (*jetstream.ObjectInfo, error) {
		return s.obj.GetInfo(ctx, versionName(name, version))
	})
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return registry.StoredModule{}, nil, fmt.Errorf("%w: %s has no version %d", registry.ErrUnknownVersion, name, version)
	}
	if err != nil {
		return registry.StoredModule{}, nil, fmt.Errorf("modules: %s v%d: %w", name, version, err)
	}
	m, err := metaOf(info)
	if err != nil {
		return registry.StoredModule{}, nil, err
	}
	// Its info was found, so "not found" now is a server behind the one
	// that answered (an upload just made, hosts starting together): ask
	// again, a few times, as for a transient fault.
	notYet := func(err error) bool { return jsapi.Transient(err) || errors.Is(err, jetstream.ErrObjectNotFound) }
	wasm, err := jsapi.Retry(ctx, jsapi.Policy{PerTry: s.timeout, Attempts: 8}, notYet,
		func(ctx context.Context) ([]byte, error) { return s.obj.GetBytes(ctx, info.Name) })
	if err != nil {
		return registry.StoredModule{}, nil, fmt.Errorf("modules: %s v%d: %w", name, version, err)
	}
	return m, wasm, nil
}

func metaOf(info *jetstream.ObjectInfo) (registry.StoredModule, error) {
	var m registry.StoredModule
	if err := json.Unmarshal([]byte(info.Metadata[metaKey]), &m); err != nil {
		return m, fmt.Errorf("modules: object %s: bad metadata: %w", info.Name, err)
	}
	return m, nil
}

// Versions returns name's kept versions, oldest first.
func (s *Store) Versions(ctx context.Context, name string) ([]registry.StoredModule, error) {
	infos, err := s.list(ctx, "v/"+name+"/")
	if err != nil {
		return nil, err
	}
	out := make([]registry.StoredModule, 0, len(infos))
	for _, o := range infos {
		m, err := metaOf(o)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b registry.StoredModule) int { return a.Version - b.Version })
	return out, nil
}

// LastVersion returns the highest version kept or current.
func (s *Store) LastVersion(ctx context.Context, name string) (int, error) {
	vs, err := s.Versions(ctx, name)
	if err != nil {
		return 0, err
	}
	last := 0
	if len(vs) > 0 {
		last = vs[len(vs)-1].Version
	}
	cur, ok, err := s.currentOf(ctx, name)
	if err != nil {
		return 0, err
	}
	if ok && cur.Version > last {
		last = cur.Version
	}
	return last, nil
}

// Remove makes name current no more.
func (s *Store) Remove(ctx context.Context, name string) error {
	if err := s.delete(ctx, currentName(name)); err != nil {
		return fmt.Errorf("modules: remove %s: %w", name, err)
	}
	s.wrote(currentName(name), true)
	return nil
}

// Watch calls changed with the name of each module whose current version is
// stored or removed (by any host, this one included) until ctx is done; it
// calls ready once its consumer exists, so every later change reaches it.
func (s *Store) Watch(ctx context.Context, ready func(), changed func(name string)) error {
	w, err := s.obj.Watch(ctx, jetstream.UpdatesOnly())
	if err != nil {
		return fmt.Errorf("modules: watch: %w", err)
	}
	defer w.Stop()
	ready()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case info, ok := <-w.Updates():
			if !ok {
				return errors.New("modules: watch ended")
			}
			if info == nil {
				continue
			}
			if name, ok := strings.CutPrefix(info.Name, "c/"); ok {
				changed(name)
			}
		}
	}
}
