package registry

import (
	"context"
	"fmt"
	"time"
)

// Rollback deploys again the bytes of a kept version of the module, as its
// next version (whose RolledBackFrom says which). The module may have been
// deleted since: a rollback brings it back.
func (r *Registry) Rollback(ctx context.Context, name string, version int) (Info, error) {
	if err := validName(name); err != nil {
		return Info{}, err
	}
	_, wasm, err := r.store.Load(ctx, name, version)
	if err != nil {
		return Info{}, err
	}
	info, _, err := r.put(ctx, name, wasm, version)
	return info, err
}

// Versions describes the kept versions of a module, oldest first; the last
// is the current one unless the module was deleted. ErrUnknownModule when
// none is kept and none is deployed.
func (r *Registry) Versions(name string) ([]VersionInfo, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	kept, err := r.store.Versions(context.Background(), name)
	if err != nil {
		return nil, fmt.Errorf("registry: versions of %s: %w", name, err)
	}
	cur, deployed := r.mods[name]
	if len(kept) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrUnknownModule, name)
	}
	out := make([]VersionInfo, len(kept))
	for i, s := range kept {
		out[i] = VersionInfo{Version: s.Version, SHA256: s.SHA256, Size: s.Size, Uploaded: s.Uploaded,
			RolledBackFrom: s.RolledBackFrom, Current: deployed && s.Version == cur.Version}
	}
	return out, nil
}

// VersionBytes returns a kept version of a module and its bytes, as they were uploaded (a replay of
// an attempt capsule runs the version that made it). ErrUnknownVersion when the version is not kept.
func (r *Registry) VersionBytes(ctx context.Context, name string, version int) (VersionInfo, []byte, error) {
	if err := validName(name); err != nil {
		return VersionInfo{}, nil, err
	}
	s, wasm, err := r.store.Load(ctx, name, version)
	if err != nil {
		return VersionInfo{}, nil, err
	}
	return VersionInfo{Version: s.Version, SHA256: s.SHA256, Size: s.Size, Uploaded: s.Uploaded,
		RolledBackFrom: s.RolledBackFrom}, wasm, nil
}

// VersionInfo describes one kept version of a module.
type VersionInfo struct {
	Version        int
	SHA256         string
	Size           int
	Uploaded       time.Time
	RolledBackFrom int  // the version a rollback deployed again; 0 for an upload
	Current        bool // the deployed version
}
