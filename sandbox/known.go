package sandbox

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/berthhq/berth/wasm/abi"
)

// knownModules keeps, beside wazero's compilation cache, what a Load learnt
// of a module: that its bytes compiled, that its imports and exports fit the
// ABI, and the description its berth_describe gave. A Load that finds its
// module known and its machine code cached (compiledMarks, or in memory)
// takes the description from here and returns; the compile (on a hit, still
// wazero's decode and validation) and the first instance are made in the
// background, while the caller stores the version. A new host over a filled
// cache answers a PUT without running the guest, and a restart deploys its
// modules the same way.
//
// The key is the upload's sha256 with everything the description may depend
// on: the module's configuration (a guest may read it in _initialize), its
// memory limit and init timeout, how deadlines stop it, and the host's ABI
// version. A file holds a header (magic, the CRC-32C of the rest), the
// linear memory an instance of the module had after its _initialize (8
// bytes, little-endian; the first version of the file, knownMagicV0, has
// none) and the description as the ABI encodes it. A file that is missing,
// truncated, fails its checksum or does not decode is a miss: the module is
// started in the foreground and the file written again, to a temporary name
// and renamed.
type knownModules struct{ dir string }

var (
	knownMagic   = []byte("berthkm\x01")
	knownMagicV0 = []byte("berthkm\x00") // the description alone
)

const knownHeader = 8 + 4 // magic, checksum

// known is what a record holds.
type known struct {
	desc abi.Description
	// freshBytes is the linear memory of an instance after its _initialize
	// (0: not recorded): the first instance a later start makes gets that
	// room from the start (Module.memoryHint) instead of growing to it by
	// copies, on a new host's fresh pages.
	freshBytes uint64
}

// newKnownModules returns the records under cacheDir; nil without one.
func newKnownModules(cacheDir string) *knownModules {
	if cacheDir == "" {
		return nil
	}
	return &knownModules{dir: filepath.Join(cacheDir, "berth-known")}
}

// knownKey is the record's key of the module with hash sha (hex), loaded
// under mc (with its defaults) and the deadline guard guard.
func knownKey(sha, guard string, mc ModuleConfig) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00abi%d\x00pages%d\x00init%d\x00", sha, guard, abi.Version, mc.MemoryLimitPages, mc.InitTimeout)
	hosts := slices.Clone(mc.AllowedHosts)
	slices.Sort(hosts)
	for _, a := range hosts {
		fmt.Fprintf(h, "host\x00%q\x00", a)
	}
	for _, k := range slices.Sorted(maps.Keys(mc.Config)) {
		fmt.Fprintf(h, "config\x00%q\x00%q\x00", k, mc.Config[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// load returns what is recorded under key, if anything.
func (k *knownModules) load(key string) (known, bool) {
	if k == nil {
		return known{}, false
	}
	b, err := os.ReadFile(filepath.Join(k.dir, key))
	if err != nil || len(b) < knownHeader {
		return known{}, false
	}
	v0 := bytes.Equal(b[:8], knownMagicV0)
	if !v0 && !bytes.Equal(b[:8], knownMagic) {
		return known{}, false
	}
	body := b[knownHeader:]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[8:12]) {
		return known{}, false
	}
	var rec known
	if !v0 {
		if len(body) < 8 {
			return known{}, false
		}
		rec.freshBytes, body = binary.LittleEndian.Uint64(body), body[8:]
	}
	if rec.desc, err = abi.DecodeDescription(body); err != nil || rec.desc.Validate() != nil {
		return known{}, false
	}
	return rec, true
}

// store records rec under key. Only a later start's speed depends on it.
func (k *knownModules) store(key string, rec *known) error {
	if k == nil {
		return nil
	}
	body := binary.LittleEndian.AppendUint64(nil, rec.freshBytes)
	body = abi.AppendDescription(body, &rec.desc)
	var head [knownHeader]byte
	copy(head[:], knownMagic)
	binary.LittleEndian.PutUint32(head[8:], crc32.Checksum(body, castagnoli))
	return writeRenamed(k.dir, key, head[:], body)
}

// writeRenamed writes parts, in order, to a temporary file in dir and
// renames it to name: a crash leaves no half file under the real name.
// Nothing is synced: these files are caches, and a torn one fails its
// checksum.
func writeRenamed(dir, name string, parts ...[]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "tmp-*")
	if err != nil {
		return err
	}
	for _, p := range parts {
		if err == nil {
			_, err = f.Write(p)
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
