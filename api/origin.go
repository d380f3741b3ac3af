package api

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/labstack/echo/v4"
)

// The API answers only requests meant for it. With no token configured (the
// loopback default) every request is admin, so without these checks any page
// the operator's browser opens could drive the host: a page on another
// origin by posting simple requests (text/plain bodies, forms, no-cors
// fetches), and a DNS-rebinding page (an attacker's name that resolves to
// 127.0.0.1) even by reading, since the browser takes it for the page's own
// origin. Bearer tokens are no ambient credential, so with tokens these
// checks only add to them.

// guardOrigin refuses, before the route's handler runs, with 400 a request
// whose target is in absolute form (see absoluteForm), and with 403:
//   - every request, reads included, whose Host is not an address the host
//     serves (see hostAllowed): a rebinding page is same-origin with its own
//     name, and only its Host tells it apart;
//   - every state-changing request a browser sent from another origin, as
//     net/http's CrossOriginProtection sees it (Sec-Fetch-Site, or else
//     Origin against Host). Clients that are not browsers (curl, the CLI)
//     send neither header and pass.
func (s *Server) guardOrigin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if p := absoluteForm(r); p != nil {
			s.log.Warn("refused a request in absolute form", "method", r.Method, "target", r.RequestURI, "host", r.Host)
			return p
		}
		srv := s.deps.Config().Server
		listen, _, _ := net.SplitHostPort(srv.Listen)
		if !hostAllowed(r.Host, servedAddr(r, listen), listen, srv.AllowedHosts) {
			s.log.Warn("refused a request for a host this server is not", "method", r.Method, "path", r.URL.Path, "host", r.Host, "origin", r.Header.Get("Origin"))
			return problem(http.StatusForbidden, "foreign-host", fmt.Sprintf(
				"Host %q is not an address this host serves; if it is one of its names, add it to server.allowed-hosts", r.Host))
		}
		if err := s.crossOrigin.Check(r); err != nil {
			s.log.Warn("refused a cross-origin request", "method", r.Method, "path", r.URL.Path, "origin", r.Header.Get("Origin"), "sec-fetch-site", r.Header.Get("Sec-Fetch-Site"))
			return problem(http.StatusForbidden, "cross-origin", fmt.Sprintf(
				"a page on another origin may not change anything here (Origin %q, Sec-Fetch-Site %q): %v",
				r.Header.Get("Origin"), r.Header.Get("Sec-Fetch-Site"), err))
		}
		return next(c)
	}
}

// absoluteForm refuses a request whose target names a scheme or a host
// ("GET http://127.0.0.1:8080/v1/parked HTTP/1.1", or CONNECT's host:port)
// rather than only a path. HTTP/1.1 has servers take the host of such a
// target and ignore the Host header (net/http sets r.Host from it and
// drops the header), so the Host check would judge the target's host, not
// the header a DNS-rebinding page controls. Only proxies are sent that
// form, and the host is no proxy; refusing it leaves one Host to check.
func absoluteForm(r *http.Request) *Problem {
	if r.URL.Scheme == "" && r.URL.Host == "" {
		return nil
	}
	return problem(http.StatusBadRequest, "absolute-form", fmt.Sprintf(
		"the request target %q names a host: this host is no proxy; send the path alone (origin form), with the host in the Host header", r.RequestURI))
}

// servedAddr is the IP address r came in on: its connection's local address,
// or, for a request served in-process without a connection, listenHost's
// (unspecified for an empty host, invalid for a name).
func servedAddr(r *http.Request, listenHost string) netip.Addr {
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if ap, err := netip.ParseAddrPort(a.String()); err == nil {
			return ap.Addr().WithZone("").Unmap()
		}
	}
	switch a, err := netip.ParseAddr(listenHost); {
	case err == nil:
		return a.WithZone("").Unmap()
	case listenHost == "":
		return netip.IPv4Unspecified()
	case strings.EqualFold(listenHost, "localhost"):
		return netip.AddrFrom4([4]byte{127, 0, 0, 1})
	}
	return netip.Addr{}
}

// hostAllowed reports whether a request's Host header names this host: a
// name of server.allowed-hosts ("*": any), the name server.listen gives
// (when it gives a name, not an IP), or the address served — when that is loopback, localhost or any
// loopback IP; otherwise that very IP (any IP when the listener is
// unspecified, which only a request served in-process leaves unresolved).
// The port is not compared: a page on another port is another origin, which
// the Origin check refuses, and tunnels or port mappings keep working.
func hostAllowed(host string, served netip.Addr, listenHost string, allowed []string) bool {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = unbracket(name)
	if name == "" {
		return false
	}
	for _, a := range allowed {
		if a == "*" || sameHostName(unbracket(a), name) {
			return true
		}
	}
	if _, err := netip.ParseAddr(listenHost); err != nil && listenHost != "" && strings.EqualFold(listenHost, name) {
		return true // listening on a name, as written
	}
	if ip, err := netip.ParseAddr(name); err == nil {
		ip = ip.WithZone("").Unmap()
		return served.IsUnspecified() || ip == served || ip.IsLoopback() && served.IsLoopback()
	}
	return strings.EqualFold(name, "localhost") && (served.IsLoopback() || served.IsUnspecified())
}

// sameHostName compares host names case-insensitively and IP addresses by
// value (::1 is 0:0::1).
func sameHostName(a, b string) bool {
	ia, errA := netip.ParseAddr(a)
	ib, errB := netip.ParseAddr(b)
	if errA == nil && errB == nil {
		return ia.WithZone("").Unmap() == ib.WithZone("").Unmap()
	}
	return strings.EqualFold(a, b)
}

func unbracket(h string) string {
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		return h[1 : len(h)-1]
	}
	return h
}
