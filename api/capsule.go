package api

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"

	"github.com/berthhq/berth/ledger"
	"github.com/labstack/echo/v4"
)

// mediaCapsule is the media type of an attempt capsule: the JSON of
// wasm/abi's Capsule (format berth-capsule/1), served as the ledger keeps it.
const mediaCapsule = "application/vnd.berth.capsule+json"

// getCapsule answers the capsule of a parked aggregate's failed attempt
// (the one that parked it, or its last long-horizon retry's), as a file to
// save and replay (berth parked replay). Once the aggregate is resolved,
// its latest resolved record's capsule is answered while the retention
// keeps it, so that a failure resumed in a hurry can still be replayed.
func (s *Server) getCapsule(c echo.Context) error {
	sub, typ, id := c.Param("name"), c.Param("type"), c.Param("id")
	capsule, parked, err := s.capsule(c.Request().Context(), sub, typ, id)
	switch {
	case errors.Is(err, ledger.ErrNotFound) && parked:
		return notFound("the parked record of %s/%s of %q has no capsule: its failed attempt was not recorded "+
			"(a host without capsules, or a capsule past the ledger's size limit, parked it)", typ, id, sub)
	case errors.Is(err, ledger.ErrNotFound) && !slices.Contains(s.deps.Engine.Subscriptions(), sub):
		return s.unknownSubscription(sub)
	case errors.Is(err, ledger.ErrNotFound):
		return notFound("no capsule of %s/%s of %q: it is not parked, and its latest resolved record kept has none", typ, id, sub)
	case err != nil:
		return err
	}
	c.Response().Header().Set("Content-Disposition", `attachment; filename="`+capsuleFilename(sub, typ, id)+`"`)
	return c.Blob(http.StatusOK, mediaCapsule, capsule)
}

// capsule reads an aggregate's capsule (ledger.ErrNotFound: none) and
// whether the aggregate is parked, for the 404 to say which is missing.
func (s *Server) capsule(ctx context.Context, sub, typ, id string) (capsule []byte, parked bool, err error) {
	err = s.deps.Ledger.View(ctx, func(tx ledger.Tx) error {
		capsule, err = tx.Capsule(sub, typ, id)
		if !errors.Is(err, ledger.ErrNotFound) {
			return err
		}
		_, perr := tx.Parked(sub, typ, id)
		if perr != nil && !errors.Is(perr, ledger.ErrNotFound) {
			return perr
		}
		parked = perr == nil
		return err
	})
	return capsule, parked, err
}

// capsulePath is the path of a parked record's capsule, each name
// percent-encoded.
func capsulePath(sub, typ, id string) string {
	return "/v1/subscriptions/" + url.PathEscape(sub) + "/parked/" + url.PathEscape(typ) + "/" + url.PathEscape(id) + "/capsule"
}

// capsuleFilename is the name a capsule is saved under,
// capsule-<sub>-<type>-<id>.json, with every byte but ASCII letters,
// digits, ".", "-" and "_" made "_" (names may hold any byte: none may reach a
// header, a path or a shell through it), each name cut at 60 bytes.
func capsuleFilename(sub, typ, id string) string {
	safe := func(s string) string {
		b := []byte(s)
		if len(b) > 60 {
			b = b[:60]
		}
		for i, c := range b {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
				b[i] = '_'
			}
		}
		return string(b)
	}
	return "capsule-" + safe(sub) + "-" + safe(typ) + "-" + safe(id) + ".json"
}
