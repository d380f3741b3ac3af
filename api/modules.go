package api

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/berthhq/berth/api/wire"
	"github.com/berthhq/berth/registry"
	"github.com/berthhq/berth/sandbox"
	"github.com/labstack/echo/v4"
)

func (s *Server) putModule(c echo.Context) error {
	name := c.Param("name")
	body, err := readBody(c.Request().Body, c.Request().ContentLength) // capped at server.max-module-size (limitBody)
	if err != nil {
		return bodyReadError(err) // past the cap 413; a broken upload is the client's fault: 400; nothing stored
	}
	info, created, err := s.deps.Modules.Put(c.Request().Context(), name, body)
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
	return c.JSON(status, toWireModule(info))
}

// readBody reads a request's body into one buffer of its announced length n
// (limitBody refused a larger one than the route allows, and caps the
// read), where io.ReadAll would grow and
// copy a module's megabytes a dozen times.
func readBody(body io.Reader, n int64) ([]byte, error) {
	if n <= 0 {
		return io.ReadAll(body)
	}
	// ReadFrom grows a buffer with less than MinRead free: room for the EOF read too.
	buf := bytes.NewBuffer(make([]byte, 0, n+bytes.MinRead))
	_, err := buf.ReadFrom(body)
	return buf.Bytes(), err
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
