package config

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// checkHTTPURL checks an http:// or https:// URL with a host. With creds
// not "", credentials in the URL are refused (they would be logged), creds
// saying where they go instead. The one URL check of the config's keys.
func checkHTTPURL(raw, creds string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("not a URL: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("want an http:// or https:// URL")
	}
	if u.Host == "" {
		return fmt.Errorf("the URL has no host")
	}
	if creds != "" && u.User != nil {
		return fmt.Errorf("credentials in the URL would be logged; %s", creds)
	}
	return nil
}

// checkHost checks an allowed-hosts entry: "*", or a host name or IP
// address, with a port when withPort (host:port; an IPv6 address in
// brackets), else without one (with or without brackets). The one host
// check of the config's keys.
func checkHost(h string, withPort bool) error {
	what, each := "a host name", "name"
	if withPort {
		what, each = "a host or host:port", "host"
	}
	switch {
	case h == "*":
		return nil
	case h == "":
		return fmt.Errorf("empty host")
	case strings.Contains(h, "://") || strings.ContainsAny(h, "/?#@"):
		return fmt.Errorf("want %s, not a URL", what)
	case strings.ContainsAny(h, " \t\r\n"):
		return fmt.Errorf("a host must not contain spaces")
	case strings.Contains(h, "*"):
		return fmt.Errorf(`wildcards are not supported; list each %s, or "*" for any`, each)
	}
	if !withPort {
		if _, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")); err == nil {
			return nil
		}
		if _, _, err := net.SplitHostPort(h); err == nil || strings.Contains(h, ":") {
			return fmt.Errorf("want a name without a port: the Host check compares names only")
		}
		return nil
	}
	if host, port, err := net.SplitHostPort(h); err == nil {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("port %q: want a number from 1 to 65535", port)
		}
		if host == "" {
			return fmt.Errorf("empty host before the port")
		}
	}
	return nil
}
