package sandbox

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"path/filepath"

	"github.com/berthhq/berth/sandbox/internal/loopguard"
)

// guardStore keeps what the loop guard made of each module on disk, beside
// wazero's compilation cache, keyed by the sha256 of the uploaded bytes: a
// host that starts over a filled cache skips the rewrite (10-15 ms for a Go
// guest) as wazero skips the compile, and hashes the upload once. The
// rewrite depends on nothing else (the memory limit does not enter it), so
// the key is the upload's hash and the rewrite's version.
//
// A file holds a header (magic, the guard, the CRC-32C of the rest) and the
// rewritten module, or nothing for a module the guard cannot rewrite (it
// runs under close-on-done). A file that is missing, truncated or fails its
// checksum is a miss: the module is rewritten again and the file replaced.
// Files are written to a temporary name and renamed, so a crash leaves no
// half file under the real name.
type guardStore struct{ dir string }

var (
	guardMagic = []byte("berthlg\x00")
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
)

const guardHeader = 8 + 1 + 4 // magic, guard kind, checksum

// Guard kinds as stored.
const (
	storedLoopGuard   = 1
	storedCloseOnDone = 2
)

// newGuardStore returns the store under cacheDir; nil without a cache dir.
func newGuardStore(cacheDir string) *guardStore {
	if cacheDir == "" {
		return nil
	}
	return &guardStore{dir: filepath.Join(cacheDir, "berth-loopguard")}
}

func (g *guardStore) path(sum [32]byte) string {
	return filepath.Join(g.dir, fmt.Sprintf("%s-v%d-i%d", hex.EncodeToString(sum[:]), loopguard.Version, loopguard.DefaultInterval))
}

// load returns the stored rewrite of the upload with hash sum, if any,
// mapped from its file (readMapped), read-only.
func (g *guardStore) load(sum [32]byte) (code []byte, guard string, ok bool) {
	b, drop, err := readMapped(g.path(sum))
	if err != nil {
		return nil, "", false
	}
	code, guard, ok = parseGuard(b)
	if len(code) == 0 {
		drop() // nothing refers to it
	}
	return code, guard, ok
}

// parseGuard checks a guard file's header and checksum and returns what
// it holds.
func parseGuard(b []byte) (code []byte, guard string, ok bool) {
	if len(b) < guardHeader || !bytes.Equal(b[:8], guardMagic) {
		return nil, "", false
	}
	body := b[guardHeader:]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[9:13]) {
		return nil, "", false
	}
	switch b[8] {
	case storedLoopGuard:
		if len(body) == 0 {
			return nil, "", false
		}
		return body, guardLoop, true
	case storedCloseOnDone:
		return nil, guardCloseOnDone, true
	}
	return nil, "", false
}

// store keeps the rewrite of the upload with hash sum: code under the loop
// guard, or the fact that it runs under close-on-done (code nil).
func (g *guardStore) store(sum [32]byte, code []byte, guard string) error {
	kind := byte(storedLoopGuard)
	if guard == guardCloseOnDone {
		kind, code = storedCloseOnDone, nil
	}
	var head [guardHeader]byte
	copy(head[:], guardMagic)
	head[8] = kind
	binary.LittleEndian.PutUint32(head[9:], crc32.Checksum(code, castagnoli))
	return writeRenamed(g.dir, filepath.Base(g.path(sum)), head[:], code)
}
