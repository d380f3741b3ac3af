package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/berthhq/berth/api/wire"
	"github.com/berthhq/berth/registry"
	"github.com/berthhq/berth/sandbox"
	"github.com/labstack/echo/v4"
)

func (s *Server) putModule(c echo.Context) error {
	name := c.Param("name")
	body, unchanged, err := s.readModule(c, name)
	if err != nil || unchanged != nil {
		return s.answerPut(c, unchanged, false, err)
	}
	info, created, err := s.deps.Modules.Put(c.Request().Context(), name, body)
	return s.answerPut(c, &info, created, err)
}

func (s *Server) answerPut(c echo.Context, info *registry.Info, created bool, err error) error {
	switch {
	case errors.Is(err, registry.ErrInvalidName):
		return badRequest("invalid-name", "%v", err)
	case errors.Is(err, sandbox.ErrNotWasm):
		return badRequest("not-wasm", "%v", err)
	case errors.Is(err, sandbox.ErrInvalidModule):
		return badRequest("invalid-module", "%v", err)
	case errors.Is(err, sandbox.ErrABI):
		return badRequest("abi", "%v", err)
	case errors.Is(err, registry.ErrConflict):
		return problem(http.StatusConflict, "conflict", err.Error())
	case err != nil:
		return err
	}
	auditNote(c, auditDetailKey, "version %d, sha256 %s", info.Version, info.SHA256)
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.JSON(status, toWireModule(*info))
}

// readModule reads an upload's body (capped at server.max-module-size by
// limitBody) into one buffer of its announced length. The upload of the
// bytes name runs now is answered from their hash before anything else
// (unchanged is that version then): from the request's Content-Digest
// without reading the body at all, when it names them (a client that sent
// Expect: 100-continue, as the CLI does, then never sends it), else from
// the hash taken as the body is read. Only an upload of the running
// module's size is read so, into a buffer reused from the last upload that
// changed nothing: a new one cost most of such a request in page faults.
// Bytes that do change something are the module's from then on (the
// sandbox keeps them to compile again): their buffer is not reused. A
// body whose SHA-256 is not its Content-Digest's is refused
// (digest-mismatch): it is not the module its sender meant.
func (s *Server) readModule(c echo.Context, name string) (body []byte, unchanged *registry.Info, err error) {
	req := c.Request()
	digest, hasDigest, err := contentDigest(req.Header)
	if err != nil {
		return nil, nil, err
	}
	cur, known := s.deps.Modules.Get(name)
	sameSize := known && int64(cur.Size) == req.ContentLength
	if sameSize && hasDigest {
		info, ok, err := s.deps.Modules.Unchanged(req.Context(), name, digest)
		if ok || err != nil {
			// None of the body is read, so the connection cannot carry
			// another request; closing it also keeps net/http from asking
			// for the body (100 Continue) to drain it before the answer.
			c.Response().Header().Set(echo.HeaderConnection, "close")
			return nil, &info, err
		}
	}
	var bp *[]byte // a reused buffer, for the running module's size alone
	var buf []byte
	if sameSize {
		bp = reuploadBufs.Get().(*[]byte)
		buf = *bp
	}
	// reuse gives the buffer back: what was read into it is not kept.
	reuse := func() {
		if bp != nil {
			*bp = body[:0]
			reuploadBufs.Put(bp)
		}
	}
	rd, h := io.Reader(c.Request().Body), sha256.New()
	if sameSize || hasDigest {
		rd = io.TeeReader(rd, h)
	}
	if body, err = readBody(rd, buf, req.ContentLength); err != nil {
		reuse()
		return nil, nil, bodyReadError(err)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	if hasDigest && sum != digest {
		reuse()
		return nil, nil, badRequest("digest-mismatch", "the body's SHA-256 is %s, its Content-Digest says %s: nothing was stored",
			hex.EncodeToString(sum[:]), hex.EncodeToString(digest[:]))
	}
	if sameSize && !hasDigest {
		info, ok, err := s.deps.Modules.Unchanged(req.Context(), name, sum)
		if ok || err != nil {
			reuse()
			return nil, &info, err
		}
	}
	return body, nil, nil
}

// reuploadBufs holds the buffers of uploads that changed nothing; a GC or
// two drops them.
var reuploadBufs = sync.Pool{New: func() any { return new([]byte) }}

// readBody reads a request's body into buf (a new one if it has too
// little room) of its announced length n (limitBody refused a larger one
// than the route allows, and caps the read), where io.ReadAll would grow
// and copy a module's megabytes a dozen times.
func readBody(body io.Reader, buf []byte, n int64) ([]byte, error) {
	if n <= 0 {
		return io.ReadAll(body)
	}
	if int64(cap(buf)) < n+bytes.MinRead {
		// ReadFrom grows a buffer with less than MinRead free: room for the EOF read too.
		buf = make([]byte, 0, n+bytes.MinRead)
	}
	b := bytes.NewBuffer(buf[:0])
	_, err := b.ReadFrom(body)
	return b.Bytes(), err
}

func (s *Server) listModules(c echo.Context) error {
	list := wire.ModuleList{Modules: mapSlice(s.deps.Modules.List(), toWireModule)}
	if list.Modules == nil {
		list.Modules = []wire.ModuleInfo{}
	}
	return c.JSON(http.StatusOK, list)
}

func (s *Server) getModule(c echo.Context) error {
	info, ok := s.deps.Modules.Get(c.Param("name"))
	if !ok {
		return notFound("no module named %q", c.Param("name"))
	}
	return c.JSON(http.StatusOK, toWireModule(info))
}

func (s *Server) deleteModule(c echo.Context) error {
	err := s.deps.Modules.Delete(c.Request().Context(), c.Param("name"))
	if errors.Is(err, registry.ErrUnknownModule) {
		return notFound("no module named %q", c.Param("name"))
	}
	if err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) moduleVersions(c echo.Context) error {
	name := c.Param("name")
	vs, err := s.deps.Modules.Versions(name)
	switch {
	case errors.Is(err, registry.ErrInvalidName):
		return badRequest("invalid-name", "%v", err)
	case errors.Is(err, registry.ErrUnknownModule):
		return notFound("no module named %q, and no kept version of one", name)
	case err != nil:
		return err
	}
	return c.JSON(http.StatusOK, wire.ModuleVersionList{Module: name, Versions: mapSlice(vs, toWireVersion)})
}

// moduleVersionWasm answers a kept version's bytes as uploaded: what `berth parked replay` runs
// again. The ETag is their sha256, which the capsule names.
func (s *Server) moduleVersionWasm(c echo.Context) error {
	name := c.Param("name")
	v, err := strconv.Atoi(c.Param("version"))
	if err != nil || v < 1 {
		return badRequest("invalid-path", "version %q is not a version number (1, 2, …)", c.Param("version"))
	}
	info, wasm, err := s.deps.Modules.VersionBytes(c.Request().Context(), name, v)
	switch {
	case errors.Is(err, registry.ErrInvalidName):
		return badRequest("invalid-name", "%v", err)
	case errors.Is(err, registry.ErrUnknownVersion):
		return notFound("%v (GET /v1/modules/%s/versions lists the kept ones)", err, name)
	case err != nil:
		return err
	}
	c.Response().Header().Set("ETag", `"`+info.SHA256+`"`)
	return c.Blob(http.StatusOK, "application/wasm", wasm)
}

func (s *Server) rollbackModule(c echo.Context) error {
	var req wire.RollbackRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Version == nil || *req.Version < 1 {
		return fieldProblem("invalid-request", "version", "version is required: the kept version to deploy again (GET /v1/modules/{name}/versions lists them)")
	}
	name := c.Param("name")
	info, err := s.deps.Modules.Rollback(c.Request().Context(), name, *req.Version)
	switch {
	case errors.Is(err, registry.ErrInvalidName):
		return badRequest("invalid-name", "%v", err)
	case errors.Is(err, registry.ErrUnknownVersion):
		return notFound("%v", err)
	case errors.Is(err, registry.ErrConflict):
		return problem(http.StatusConflict, "conflict", err.Error())
	case err != nil:
		return err
	}
	auditNote(c, auditDetailKey, "version %d from version %d", info.Version, *req.Version)
	return c.JSON(http.StatusOK, toWireModule(info))
}
