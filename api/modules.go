package api

import (
	"errors"
	"io"
	"net/http"

	"github.com/berthhq/berth/api/wire"
	"github.com/berthhq/berth/registry"
	"github.com/berthhq/berth/sandbox"
	"github.com/labstack/echo/v4"
)

func (s *Server) putModule(c echo.Context) error {
	name := c.Param("name")
	body, err := io.ReadAll(c.Request().Body) // capped at server.max-module-size (limitBody)
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
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.JSON(status, toWireModule(info))
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
