package api

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/berthhq/berth/api/wire"
	"github.com/berthhq/berth/ledger"
	"github.com/labstack/echo/v4"
)

// projectionSub returns the subscription of the request, 404 unless a
// deployed projection serves it.
func (s *Server) projectionSub(c echo.Context) (string, error) {
	sub := c.Param("subscription")
	if s.deps.Modules == nil || !s.deps.Modules.IsProjection(sub) {
		return "", notFound("no deployed projection has subscription %q", sub)
	}
	return sub, nil
}

// getProjection answers one value of a read model: a JSON value as
// application/json, any other as application/octet-stream.
func (s *Server) getProjection(c echo.Context) error {
	sub, err := s.projectionSub(c)
	if err != nil {
		return err
	}
	key := c.Param("key")
	var v []byte
	err = s.deps.Ledger.View(c.Request().Context(), func(tx ledger.Tx) error {
		v, err = tx.ProjectionGet(sub, key)
		return err
	})
	if errors.Is(err, ledger.ErrNotFound) {
		return notFound("the read model of %s has no key %q", sub, key)
	}
	if err != nil {
		return err
	}
	if json.Valid(v) {
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, v)
	}
	return c.Blob(http.StatusOK, echo.MIMEOctetStream, v)
}

// listProjection answers a page of a read model's keys, in byte order.
func (s *Server) listProjection(c echo.Context) error {
	sub, err := s.projectionSub(c)
	if err != nil {
		return err
	}
	limit, err := queryLimit(c, 100, 1000)
	if err != nil {
		return err
	}
	prefix, after := c.QueryParam("prefix"), c.QueryParam("after")
	var entries []ledger.ProjectionEntry
	var next string
	err = s.deps.Ledger.View(c.Request().Context(), func(tx ledger.Tx) error {
		entries, next, err = tx.ProjectionList(sub, prefix, after, limit)
		return err
	})
	if err != nil {
		return err
	}
	page := wire.ProjectionPage{Entries: make([]wire.ProjectionEntry, 0, len(entries)), Next: next}
	for _, e := range entries {
		ej := wire.ProjectionEntry{Key: e.Key}
		if json.Valid(e.Value) {
			ej.Value = e.Value
		} else {
			ej.Base64 = base64.StdEncoding.EncodeToString(e.Value)
		}
		page.Entries = append(page.Entries, ej)
	}
	return c.JSON(http.StatusOK, page)
}
