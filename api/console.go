package api

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"

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
	s.e.GET("/console/*", func(c echo.Context) error {
		// Only a file the console has reaches the file server, whose own
		// answers to anything else are text/plain (a 500 for a name that
		// is not valid UTF-8, like /console/%ff): those are 404 problems.
		name := strings.TrimSuffix(strings.TrimPrefix(c.Request().URL.Path, "/console/"), "/")
		if name == "" {
			name = "."
		}
		if _, err := fs.Stat(sub, name); err != nil {
			return notFound("the console has no file %q", name)
		}
		files.ServeHTTP(c.Response(), c.Request())
		return nil
	})
}
