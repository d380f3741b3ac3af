package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/berthhq/berth/api/wire"
	"github.com/berthhq/berth/internal/testing/testbuild"
)

// TestReuploadAnsweredFromItsHash: an upload of the running module's size
// is hashed as it is read (readModule). The same bytes answer 200 with the
// running version; a body of that size that breaks off is a 400 that
// changes nothing; other bytes of the same size deploy as the next version,
// with their own hash; and the same bytes again after them answer that
// version, read into the buffer the unchanged uploads left.
func TestReuploadAnsweredFromItsHash(t *testing.T) {
	t.Parallel()
	h := newHost(t, "")
	wasm := testbuild.Rebuilt(notifier(t), "a")
	put := func(body []byte, want int) wire.ModuleInfo {
		t.Helper()
		r := h.do(req{method: "PUT", path: "/v1/modules/shipment-notifier", body: string(body), contentType: "application/wasm"})
		if r.status != want {
			t.Fatalf("PUT: %s; want %d", r, want)
		}
		var info wire.ModuleInfo
		r.json(t, &info)
		return info
	}
	first := put(wasm, http.StatusCreated)
	for range 3 {
		if again := put(wasm, http.StatusOK); again.Version != first.Version || again.SHA256 != first.SHA256 {
			t.Fatalf("the same bytes again: version %d sha %s; want %d %s", again.Version, again.SHA256, first.Version, first.SHA256)
		}
	}
	r := serveWith(h.api, req{method: "PUT", path: "/v1/modules/shipment-notifier", body: string(wasm), contentType: "application/wasm"},
		func(hr *http.Request) { hr.Body = &brokenBody{r: bytes.NewReader(wasm[:len(wasm)/2]), err: errBroken} })
	if p := problemOf(t, r, http.StatusBadRequest); !strings.Contains(p.Detail, errBroken.Error()) {
		t.Errorf("a re-upload broken off: detail %q", p.Detail)
	}

	other := testbuild.Rebuilt(notifier(t), "b") // the same size
	next := put(other, http.StatusOK)
	sum := sha256.Sum256(other)
	if next.Version != first.Version+1 || next.SHA256 != hex.EncodeToString(sum[:]) || next.Size != len(wasm) {
		t.Fatalf("other bytes of the same size: version %d sha %s size %d; want %d %x %d", next.Version, next.SHA256, next.Size,
			first.Version+1, sum, len(wasm))
	}
	if again := put(other, http.StatusOK); again.Version != next.Version {
		t.Fatalf("those bytes again: version %d; want %d", again.Version, next.Version)
	}
	if cur, _ := h.modules.Get("shipment-notifier"); cur.Version != next.Version || cur.SHA256 != next.SHA256 {
		t.Errorf("running after all: %+v; want version %d", cur, next.Version)
	}
}

var errBroken = errors.New("connection reset mid-upload")
