package api

import (
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
)

//go:embed openapi.json
var openapiDoc []byte

func (s *Server) openapi(c echo.Context) error {
	return c.Blob(http.StatusOK, "application/json", openapiDoc)
}
