package api

import (
	"embed"
	"io/fs"
	"net/http"

	"github.com/labstack/echo/v4"
)

//go:embed console
var consoleFiles embed.FS

// consoleRoutes serves the ops console at /console: static files embedded
// in the binary that call the REST API from the browser.
func (s *Server) consoleRoutes() {
	sub, err := fs.Sub(consoleFiles, "console")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	files := http.StripPrefix("/console/", http.FileServer(http.FS(sub)))
	s.e.GET("/console", func(c echo.Context) error { return c.Redirect(http.StatusFound, "/console/") })
	s.e.GET("/console/*", echo.WrapHandler(files))
}
