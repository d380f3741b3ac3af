package api

import (
	"net/url"

	"github.com/labstack/echo/v4"
)

// decodePathParams is the one owner of path parameter decoding: after it,
// c.Param is the decoded value, decoded exactly once, on every route.
//
// echo routes on the request's raw (escaped) path when it has one
// (URL.RawPath, set when the path holds an escape the decoded form cannot
// round-trip, like %2F) and on the decoded URL.Path otherwise; so its
// parameters are escaped in the first case and already decoded in the
// second. Using them as they come would let a skip of "a/b" (sent as a%2Fb)
// end the record of the aggregate "a%2Fb"; unescaping them again when they
// are decoded would let a%252Fb reach "a/b". Here they are unescaped only
// when echo routed on the raw path.
func decodePathParams(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if c.Request().URL.RawPath == "" {
			return next(c) // routed on the decoded path: the parameters are decoded
		}
		raw := c.ParamValues()
		decoded := make([]string, len(raw))
		for i, v := range raw {
			u, err := url.PathUnescape(v)
			if err != nil { // net/url keeps a RawPath only when it is validly escaped
				return badRequest("invalid-path", "path parameter %s is not validly percent-encoded: %v", c.ParamNames()[i], err)
			}
			decoded[i] = u
		}
		c.SetParamValues(decoded...)
		return next(c)
	}
}
