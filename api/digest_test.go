package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/api/wire"
	"github.com/berthhq/berth/internal/testing/testbuild"
)

// countingBody is a request body that counts the bytes read from it.
type countingBody struct {
	r    io.Reader
	read atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read.Add(int64(n))
	return n, err
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha-256=:" + base64.StdEncoding.EncodeToString(sum[:]) + ":"
}

// TestReuploadWithDigestSendsNoBody: over a real HTTP server, an upload
// that says its bytes' SHA-256 (Content-Digest) and sends Expect:
// 100-continue, as the CLI does, is answered from the digest when the
// module runs those bytes: 200 with the running version, and not one byte
// of the body leaves the client. Other bytes with their digest deploy as
// usual, the body sent once the host asks for it.
func TestReuploadWithDigestSendsNoBody(t *testing.T) {
	t.Parallel()
	h := newHost(t, "")
	srv := httptest.NewServer(h.api.Handler())
	t.Cleanup(srv.Close)
	// As http.DefaultTransport, which the CLI uses: the body waits up to
	// a second for the host's 100 Continue.
	tr := srv.Client().Transport.(*http.Transport).Clone()
	tr.ExpectContinueTimeout = 5 * time.Second
	client := &http.Client{Transport: tr}
	put := func(wasm []byte, want int) (wire.ModuleInfo, int64) {
		t.Helper()
		body := &countingBody{r: bytes.NewReader(wasm)}
		hr, err := http.NewRequest("PUT", srv.URL+"/v1/modules/shipment-notifier", body)
		if err != nil {
			t.Fatal(err)
		}
		hr.ContentLength = int64(len(wasm))
		hr.Header.Set("Content-Type", "application/wasm")
		hr.Header.Set("Content-Digest", digestOf(wasm))
		hr.Header.Set("Expect", "100-continue")
		resp, err := client.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("PUT: %d %s; want %d", resp.StatusCode, raw, want)
		}
		var info wire.ModuleInfo
		if err := json.Unmarshal(raw, &info); err != nil {
			t.Fatal(err)
		}
		return info, body.read.Load()
	}
	wasm := testbuild.Rebuilt(notifier(t), "a")
	first, sent := put(wasm, http.StatusCreated)
	if sent != int64(len(wasm)) {
		t.Fatalf("a new module: %d bytes of its body read, want all %d", sent, len(wasm))
	}
	for range 2 {
		again, sent := put(wasm, http.StatusOK)
		if again.Version != first.Version || again.SHA256 != first.SHA256 {
			t.Fatalf("the same bytes again: version %d sha %s; want %d %s", again.Version, again.SHA256, first.Version, first.SHA256)
		}
		if sent != 0 {
			t.Errorf("the same bytes again: %d bytes of the body sent, want none", sent)
		}
	}
	other := testbuild.Rebuilt(notifier(t), "b")
	next, sent := put(other, http.StatusOK)
	if next.Version != first.Version+1 || sent != int64(len(other)) {
		t.Fatalf("other bytes: version %d with %d bytes sent; want %d with %d", next.Version, sent, first.Version+1, len(other))
	}
}

// TestUploadDigestChecked: a body whose SHA-256 is not its Content-Digest's
// is refused (400 digest-mismatch) and stores nothing; a digest that names
// the running module is answered from it, the body unread (a sender that
// lies is told what runs, and changes nothing); a sha-256 member that is
// not 32 bytes in base64 is a bad-digest; a digest of another algorithm
// alone is ignored.
func TestUploadDigestChecked(t *testing.T) {
	t.Parallel()
	h := newHost(t, "")
	wasm := testbuild.Rebuilt(notifier(t), "a")
	other := testbuild.Rebuilt(notifier(t), "b") // the same size
	put := func(body []byte, digest string) response {
		t.Helper()
		r := serveWith(h.api, req{method: "PUT", path: "/v1/modules/shipment-notifier", body: string(body), contentType: "application/wasm"},
			func(hr *http.Request) { hr.Header.Set("Content-Digest", digest) })
		checkResponse(t, h.api, "PUT", "/v1/modules/shipment-notifier", r)
		return r
	}
	if r := put(wasm, "sha-512=:AAAA:, sha-256="+strings.TrimPrefix(digestOf(wasm), "sha-256=")); r.status != http.StatusCreated {
		t.Fatalf("a new module with its digest among others: %s", r)
	}
	if p := problemOf(t, put(other, digestOf([]byte("neither"))), http.StatusBadRequest); p.Type != wire.ProblemBase+"digest-mismatch" {
		t.Errorf("other bytes under a digest of neither: %+v; want digest-mismatch", p)
	}
	// A digest that names the running module is answered from it: the body
	// is not read, whatever it is, and nothing changes.
	if r := put(other, digestOf(wasm)); r.status != http.StatusOK {
		t.Errorf("other bytes under the running module's digest: %s; want 200, unchanged", r)
	}
	for _, bad := range []string{"sha-256=:c2hvcnQ=:", "sha-256=abc", "sha-256=:not base64!:"} {
		if p := problemOf(t, put(other, bad), http.StatusBadRequest); p.Type != wire.ProblemBase+"bad-digest" {
			t.Errorf("Content-Digest %q: %+v; want bad-digest", bad, p)
		}
	}
	if r := put(other, "sha-512=:AAAA:"); r.status != http.StatusOK {
		t.Fatalf("other bytes with a sha-512 digest alone (ignored): %s", r)
	}
	if cur, _ := h.modules.Get("shipment-notifier"); cur.Version != 2 {
		t.Errorf("running: version %d; want 2 (the refused uploads stored nothing)", cur.Version)
	}
}
