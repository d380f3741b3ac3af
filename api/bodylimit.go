package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/berthhq/berth/config"
	"github.com/labstack/echo/v4"
)

// bodyLimit is the cap on a route's request body and the setting it comes
// from: server.max-module-size for a module upload (a route that takes
// application/wasm), server.max-body-size for every other body.
func (r route) bodyLimit(srv config.ServerConfig) (limit int64, key string) {
	if slices.Contains(r.body, mediaWasm) {
		return srv.MaxModuleSize.Bytes(), "server.max-module-size"
	}
	return srv.MaxBodySize.Bytes(), "server.max-body-size"
}

// limitBody caps the request body of a state-changing route (see
// route.bodyLimit). A body that declares a larger Content-Length is
// refused with 413 at once, before a byte of it is read: reading it up to
// the cap first would leave the client, which may send nothing more until
// it has an answer, waiting for the read timeout. A body of unknown length
// (chunked) is refused with the same 413 as soon as it passes the cap; the
// reader then fails with that problem, which every reader of the body
// returns as it is (see bodyReadError).
func (s *Server) limitBody(r route) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			limit, key := r.bodyLimit(s.deps.Config().Server)
			if req.ContentLength > limit {
				// None of it is read, so the connection cannot carry another
				// request: closing it also keeps net/http from reading up to
				// 256KiB of the body before it answers (its keep-alive
				// drain), which would wait on a client that sends the body
				// only once it has an answer, or never.
				c.Response().Header().Set(echo.HeaderConnection, "close")
				return tooLarge(key, limit, fmt.Sprintf("its Content-Length is %d bytes", req.ContentLength))
			}
			if req.Body != nil && req.Body != http.NoBody {
				// The server's own ResponseWriter, not echo's wrapper of it:
				// through it MaxBytesReader tells net/http, once the cap is
				// passed, to close the connection after the answer instead
				// of reading on through the rest of the body before it.
				req.Body = &cappedBody{ReadCloser: http.MaxBytesReader(c.Response().Writer, req.Body, limit), key: key, limit: limit}
			}
			return next(c)
		}
	}
}

// cappedBody is a request body under http.MaxBytesReader (which also tells
// the server to close the connection once the cap is passed) whose error
// past the cap is the 413 problem naming the setting.
type cappedBody struct {
	io.ReadCloser
	key   string
	limit int64
}

// Read reads the body, failing with a *Problem past the cap.
func (b *cappedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return n, tooLarge(b.key, b.limit, "it went on past that")
	}
	return n, err
}

// tooLarge is the 413 of a request body past the cap of key.
func tooLarge(key string, limit int64, why string) *Problem {
	return problem(http.StatusRequestEntityTooLarge, "too-large", fmt.Sprintf(
		"the request body exceeds %s (%s, %d bytes): %s; nothing was done", key, config.Size(limit), limit, why))
}
