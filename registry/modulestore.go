package registry

import "context"

// ModuleStore keeps the modules' bytes and their versions durably. The
// embedded one is a directory of files under the data directory
// (NewFileStore); a deployment of several hosts keeps them in a JetStream
// object store (registry/jetstream), so that an upload on any host reaches
// every host (see Watcher).
type ModuleStore interface {
	// Store keeps wasm as version m.Version of module m.Name and makes it
	// the current one; then removes the oldest versions beyond keep. A
	// store shared by several hosts fails with ErrVersionTaken when another
	// host's upload has that number, storing nothing.
	Store(ctx context.Context, m StoredModule, wasm []byte, keep int) error
	// Current returns every module's current version and its bytes.
	Current(ctx context.Context) ([]StoredModule, [][]byte, error)
	// Load returns a kept version (or the current one, by its number) and
	// its bytes; ErrUnknownVersion if there is none.
	Load(ctx context.Context, name string, version int) (StoredModule, []byte, error)
	// Versions returns name's kept versions, oldest first (the current one
	// included, also when it was stored before versions were kept).
	Versions(ctx context.Context, name string) ([]StoredModule, error)
	// LastVersion returns the highest version number name has had (0 if
	// none), so the next upload numbers after every one kept.
	LastVersion(ctx context.Context, name string) (int, error)
	// Remove makes name current no more; its kept versions stay.
	Remove(ctx context.Context, name string) error
}

// Watcher is a ModuleStore shared by several hosts: Watch calls changed
// with the name of each module whose current version another host stored
// or removed, until ctx is done. It calls ready once, as soon as the watch
// will see every change from then on: what changed before (while the host
// opened, or while a failed watch was started again) the caller reads then.
type Watcher interface {
	Watch(ctx context.Context, ready func(), changed func(name string)) error
	// CurrentVersions returns every module's current version without its
	// bytes, for a look repeated in case the watch missed a change.
	CurrentVersions(ctx context.Context) ([]StoredModule, error)
	// CurrentVersion returns module name's current version without its
	// bytes; false when the store has none. It reads that module's own
	// record, so that a module is undeployed only on the store's word about
	// it, never for missing from a listing (one read from a server behind the
	// others can miss it).
	CurrentVersion(ctx context.Context, name string) (StoredModule, bool, error)
}
