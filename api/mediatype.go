package api

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
)

// Media types of request bodies, as the route table names them.
const (
	mediaJSON   = "application/json"
	mediaWasm   = "application/wasm"
	mediaBinary = "application/octet-stream"
)

// accepts refuses with 415 a state-changing request whose body is not of one
// of types, the media types the route documents (none: it takes no body).
// A Content-Type must name one of them (parameters allowed); a body without
// a Content-Type is refused; an empty body without one is no body at all, so
// that resume and skip can leave theirs out (a route that needs a body says
// so itself, with a 400). Besides the Origin check, this keeps out what a
// browser sends across origins without asking first: text/plain and form
// bodies, all of them CORS "simple" requests. A JSON body in a charset
// other than UTF-8, and a body with a content coding, are refused too.
func accepts(types []string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			what := r.Method + " " + r.URL.Path
			ct := r.Header.Get(echo.HeaderContentType)
			switch {
			case ct != "":
				mt, params, err := mime.ParseMediaType(ct)
				switch {
				case len(types) == 0:
					return unsupported("%s takes no body: send none, without a Content-Type (got %q)", what, ct)
				case err != nil:
					return unsupported("Content-Type %q is not a media type (%v); %s takes %s", ct, err, what, strings.Join(types, " or "))
				case !slices.Contains(types, mt):
					return unsupported("%s takes %s, not %s", what, strings.Join(types, " or "), mt)
				case mt == mediaJSON && params["charset"] != "" && !strings.EqualFold(params["charset"], "utf-8"):
					return unsupported("JSON is UTF-8 (RFC 8259): %s does not read a body in charset %s", what, params["charset"])
				}
				if p := encoded(r, what); p != nil {
					return p
				}
			case bodyEmpty(r):
			case len(types) == 0:
				return unsupported("%s takes no body: send none", what)
			default:
				return unsupported("the body of %s needs a Content-Type: %s", what, strings.Join(types, " or "))
			}
			return next(c)
		}
	}
}

// encoded refuses a body sent with a content coding (Content-Encoding:
// gzip, say): the host does not decode any, and reading the coded bytes as
// the body would store a module's gzip as its code or answer a JSON body
// with a misleading syntax error (RFC 9110, 15.5.16, says 415).
func encoded(r *http.Request, what string) *Problem {
	for _, v := range r.Header.Values("Content-Encoding") {
		for _, coding := range strings.Split(v, ",") {
			if c := strings.TrimSpace(coding); c != "" && !strings.EqualFold(c, "identity") {
				return unsupported("the body of %s is sent with Content-Encoding %s, which the host does not decode: send it as it is", what, c)
			}
		}
	}
	return nil
}

func unsupported(format string, args ...any) *Problem {
	return problem(http.StatusUnsupportedMediaType, "unsupported-media-type", fmt.Sprintf(format, args...))
}

// bodyEmpty reports whether r has no body. A body sent without a length
// (chunked) is read for one byte, which is put back; a read error counts as
// a body, for the handler to answer.
func bodyEmpty(r *http.Request) bool {
	switch {
	case r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0:
		return true
	case r.ContentLength > 0:
		return false
	}
	var b [1]byte
	n, err := io.ReadFull(r.Body, b[:])
	if n == 1 {
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(b[:]), r.Body), r.Body}
		return false
	}
	return err == io.EOF
}
