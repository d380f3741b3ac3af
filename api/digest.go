package api

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strings"
)

// contentDigest reads the sha-256 member of a request's Content-Digest
// header (RFC 9530: a dictionary such as `sha-256=:<base64>:`). ok is
// false without the header or without a sha-256 member (members of other
// algorithms are ignored, as the RFC asks); a sha-256 member that is not a
// byte sequence of 32 bytes is a bad request.
func contentDigest(h http.Header) (sum [sha256.Size]byte, ok bool, err error) {
	for _, line := range h.Values("Content-Digest") {
		for member := range strings.SplitSeq(line, ",") {
			key, value, _ := strings.Cut(strings.TrimSpace(member), "=")
			if strings.ToLower(strings.TrimSpace(key)) != "sha-256" {
				continue
			}
			value, _, _ = strings.Cut(value, ";") // parameters, none defined
			value = strings.TrimSpace(value)
			raw, ok := strings.CutPrefix(value, ":")
			if ok {
				raw, ok = strings.CutSuffix(raw, ":")
			}
			b, derr := base64.StdEncoding.DecodeString(raw)
			if !ok || derr != nil || len(b) != sha256.Size {
				return sum, false, badRequest("bad-digest",
					"Content-Digest: sha-256 is %q, want the body's 32-byte SHA-256 in base64 between colons (sha-256=:…:)", value)
			}
			return [sha256.Size]byte(b), true, nil
		}
	}
	return sum, false, nil
}
