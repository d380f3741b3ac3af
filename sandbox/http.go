package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/berthhq/berth/retry"
	"github.com/berthhq/berth/wasm/abi"
)

// hostHTTP is the outbound HTTP port: only hosts the module may reach, under
// the call's deadline, with a capped response body.
func (s *Sandbox) hostHTTP(_ context.Context, cs *callState, raw []byte) abi.Reply {
	req, err := abi.DecodeHTTPRequest(raw)
	if err != nil {
		return abi.Reply{Code: abi.ReplyError, Message: "bad request: " + err.Error()}
	}
	u, err := url.Parse(req.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return abi.Reply{Code: abi.ReplyError, Message: fmt.Sprintf("bad URL %q: want http(s)://host/…", req.URL)}
	}
	if !allowed(cs.mod.cfg.AllowedHosts, u) {
		return abi.Reply{Code: abi.ReplyDenied, Message: fmt.Sprintf("host %s is not in the module's allowed hosts", u.Host)}
	}
	ctx, cancel := cs.outbound()
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, req.Method, req.URL, bytes.NewReader(req.Body))
	if err != nil {
		return abi.Reply{Code: abi.ReplyError, Message: err.Error()}
	}
	for _, h := range req.Headers {
		hreq.Header.Add(h.Name, h.Value)
	}
	injectTraceparent(ctx, hreq.Header)
	client := &http.Client{
		Transport: s.cfg.HTTPTransport,
		CheckRedirect: func(r *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("too many redirects")
			}
			if !allowed(cs.mod.cfg.AllowedHosts, r.URL) {
				return fmt.Errorf("redirect to %s, which is not in the module's allowed hosts", r.URL.Host)
			}
			return nil
		},
	}
	resp, err := client.Do(hreq)
	if err != nil {
		return transportReply(cs, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, s.cfg.MaxResponseBytes+1))
	if err != nil {
		return transportReply(cs, err)
	}
	if int64(len(body)) > s.cfg.MaxResponseBytes {
		return abi.Reply{Code: abi.ReplyTooLarge, Message: fmt.Sprintf("response body exceeds %d bytes", s.cfg.MaxResponseBytes)}
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		if resp.StatusCode == http.StatusTooManyRequests {
			cs.observed.HTTP429 = true
		}
		if d := retry.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); d > cs.observed.RetryAfter {
			cs.observed.RetryAfter = d
		}
	}
	out := abi.HTTPResponse{Status: uint32(resp.StatusCode), Body: body}
	for _, name := range slices.Sorted(maps.Keys(resp.Header)) {
		out.Headers = append(out.Headers, abi.Header{Name: name, Value: strings.Join(resp.Header[name], ", ")})
	}
	return abi.Reply{Code: abi.ReplyOK, Body: abi.AppendHTTPResponse(nil, &out)}
}

func transportReply(cs *callState, err error) abi.Reply {
	if errors.Is(err, syscall.ECONNREFUSED) {
		cs.observed.ConnRefused = true
		return abi.Reply{Code: abi.ReplyRefused, Message: err.Error()}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return abi.Reply{Code: abi.ReplyTimeout, Message: err.Error()}
	}
	return abi.Reply{Code: abi.ReplyError, Message: err.Error()}
}

// allowed matches u's host against entries "host" (any port) or "host:port";
// "*" allows every host.
func allowed(hosts []string, u *url.URL) bool {
	for _, h := range hosts {
		if h == "*" || strings.EqualFold(h, u.Host) || strings.EqualFold(h, u.Hostname()) {
			return true
		}
	}
	return false
}
