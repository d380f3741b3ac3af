package registry

import (
	"slices"

	"github.com/berthhq/berth/wasm/abi"
)

// Classes returns every error class the deployed modules name, sorted and
// without repeats: those their class trees declare and those their
// processors' and handlers' retry lists name. A search or a job filtered by
// a class no module names (and no builtin class is) is most likely a typo.
func (r *Registry) Classes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, d := range r.mods {
		out = append(out, declaredClasses(d.mod.Description())...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func declaredClasses(desc abi.Description) []string {
	var out []string
	for _, c := range desc.Classes {
		out = append(out, c.Name)
	}
	out = append(out, desc.Retry.Unrecoverable...)
	out = append(out, desc.Retry.Recoverable...)
	for _, h := range desc.Handlers {
		out = append(out, h.Retry.Unrecoverable...)
		out = append(out, h.Retry.Recoverable...)
	}
	return out
}
