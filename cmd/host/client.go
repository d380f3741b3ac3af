package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/berthhq/berth/api/wire"
)

// client talks to a running host over its REST API: one method per call.
// Every method returns the server's JSON body as is; callers decode what
// they show with the API's own types (package api/wire), never the host's.
// A non-2xx answer is a *problemError, a request that never got an answer
// an *unreachableError.
type client struct {
	base  string // scheme://host[:port][/prefix], no trailing slash
	token string // sent as Authorization: Bearer when not empty
	hc    *http.Client
}

// newClient checks server (host:port, or an http or https URL) and returns
// a client for it; host:port means http://host:port.
func newClient(server, token string, timeout time.Duration) (*client, error) {
	if !strings.Contains(server, "://") {
		server = "http://" + server
	}
	u, err := url.Parse(server)
	if err != nil {
		return nil, fmt.Errorf("--server %q is not host:port or a URL: %v", server, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--server %q must be an http:// or https:// URL with a host, or host:port", server)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("--server %q must not have a query or a fragment", server)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// An upload waits this long for the host's go-ahead before it sends
	// its body anyway (pushModule): the host answers the bytes it runs
	// already from their digest, and asks for others at once.
	tr.ExpectContinueTimeout = expectContinue
	return &client{base: strings.TrimRight(u.String(), "/"), token: token, hc: &http.Client{Timeout: timeout, Transport: tr}}, nil
}

// expectContinue bounds the wait of an upload for the host's 100 Continue.
const expectContinue = 3 * time.Second

// problemError is a non-2xx answer, with the server's problem document when
// it sent one.
type problemError struct {
	Status  int          // the HTTP status
	Problem wire.Problem // the decoded problem document; zero when the body is not one
	Body    []byte       // the answer as sent
}

// Error is "Title (status): detail [field f]".
func (e *problemError) Error() string {
	title := e.Problem.Title
	if title == "" {
		title = http.StatusText(e.Status)
	}
	msg := fmt.Sprintf("%s (%d)", title, e.Status)
	if e.Problem.Detail != "" {
		msg += ": " + e.Problem.Detail
	} else if len(e.Body) > 0 && e.Problem.Type == "" {
		msg += ": " + truncate(string(e.Body), 200)
	}
	if e.Problem.Field != "" {
		msg += " [field " + e.Problem.Field + "]"
	}
	return msg
}

// unreachableError means the request got no answer: the server is down, the
// address is wrong, or the connection failed or timed out.
type unreachableError struct{ err error }

// Error is the transport's error, without the request's method and URL.
func (e *unreachableError) Error() string {
	var ue *url.Error
	if errors.As(e.err, &ue) {
		return ue.Err.Error() // without the method and URL, which the CLI prints once
	}
	return e.err.Error()
}

// Unwrap returns the transport's error.
func (e *unreachableError) Unwrap() error { return e.err }

// apiPath joins escaped path segments under /v1: each segment is sent
// percent-encoded ("/" as %2F, "%" as %25), and the server decodes it once,
// so any name reaches exactly its own resource. A segment that is "." or
// ".." is sent as %2E or %2E%2E, which no proxy or URL library takes for a
// dot segment to remove (the host refuses such aggregate names at append,
// but a record parked before may hold one).
func apiPath(segments ...string) string {
	var b strings.Builder
	b.WriteString("/v1")
	for _, s := range segments {
		b.WriteByte('/')
		if s == "." || s == ".." {
			b.WriteString(strings.ReplaceAll(s, ".", "%2E"))
			continue
		}
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

// do sends one request and returns the status and body of a 2xx answer.
func (c *client) do(ctx context.Context, method, p string, query url.Values, contentType string, body []byte) (int, []byte, error) {
	return c.doWith(ctx, method, p, query, nil, contentType, body)
}

// doWith is do with more request headers.
func (c *client) doWith(ctx context.Context, method, p string, query url.Values, header http.Header, contentType string, body []byte) (int, []byte, error) {
	target := c.base + p
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return 0, nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	req.Header.Set("User-Agent", "berth-cli")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, &unreachableError{err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, &unreachableError{fmt.Errorf("reading the answer to %s %s: %w", method, p, err)}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		pe := &problemError{Status: resp.StatusCode, Body: raw}
		if json.Unmarshal(raw, &pe.Problem) != nil {
			pe.Problem = wire.Problem{}
		}
		return resp.StatusCode, nil, pe
	}
	return resp.StatusCode, raw, nil
}

func (c *client) get(ctx context.Context, p string, query url.Values) ([]byte, error) {
	_, raw, err := c.do(ctx, http.MethodGet, p, query, "", nil)
	return raw, err
}

func (c *client) postJSON(ctx context.Context, p string, v any) ([]byte, error) {
	var body []byte
	if v != nil {
		var err error
		if body, err = json.Marshal(v); err != nil {
			return nil, err
		}
	}
	ct := ""
	if body != nil {
		ct = "application/json"
	}
	_, raw, err := c.do(ctx, http.MethodPost, p, nil, ct, body)
	return raw, err
}

// pushModule uploads a module (PUT /v1/modules/{name}); created tells a new
// module (201) from an update (200).
//
// The upload says its bytes' SHA-256 (Content-Digest) and waits for the
// host's go-ahead before sending them (Expect: 100-continue): bytes the
// module runs already are answered from their digest, never sent.
func (c *client) pushModule(ctx context.Context, name string, wasm []byte) (raw []byte, created bool, err error) {
	sum := sha256.Sum256(wasm)
	h := http.Header{
		"Content-Digest": {"sha-256=:" + base64.StdEncoding.EncodeToString(sum[:]) + ":"},
		"Expect":         {"100-continue"},
	}
	status, raw, err := c.doWith(ctx, http.MethodPut, apiPath("modules", name), nil, h, "application/wasm", wasm)
	return raw, status == http.StatusCreated, err
}

// modules lists the deployed modules (GET /v1/modules).
func (c *client) modules(ctx context.Context) ([]byte, error) {
	return c.get(ctx, apiPath("modules"), nil)
}

// module describes one module (GET /v1/modules/{name}).
func (c *client) module(ctx context.Context, name string) ([]byte, error) {
	return c.get(ctx, apiPath("modules", name), nil)
}

// deleteModule removes a module (DELETE /v1/modules/{name}).
func (c *client) deleteModule(ctx context.Context, name string) error {
	_, _, err := c.do(ctx, http.MethodDelete, apiPath("modules", name), nil, "", nil)
	return err
}

// appendEvents appends a commit (POST /v1/events); body is the request
// document as the API defines it.
func (c *client) appendEvents(ctx context.Context, body []byte) ([]byte, error) {
	_, raw, err := c.do(ctx, http.MethodPost, apiPath("events"), nil, "application/json", body)
	return raw, err
}

// subscriptions lists the subscriptions (GET /v1/subscriptions).
func (c *client) subscriptions(ctx context.Context) ([]byte, error) {
	return c.get(ctx, apiPath("subscriptions"), nil)
}

// subscription shows one subscription in detail (GET /v1/subscriptions/{name}).
func (c *client) subscription(ctx context.Context, name string) ([]byte, error) {
	return c.get(ctx, apiPath("subscriptions", name), nil)
}

// unpause unpauses a subscription and returns its state.
func (c *client) unpause(ctx context.Context, name string) ([]byte, error) {
	return c.postJSON(ctx, apiPath("subscriptions", name, "unpause"), nil)
}

// reset moves a subscription's checkpoint to position and returns its state.
func (c *client) reset(ctx context.Context, name string, position uint64) ([]byte, error) {
	return c.postJSON(ctx, apiPath("subscriptions", name, "reset"), wire.ResetRequest{Position: &position})
}

// parkedQuery filters GET /v1/parked; empty fields are left out.
type parkedQuery struct {
	Subscription, State, AggregateType string // filters
	Class, Message, Group              string
	FailedAfter, FailedBefore          string // RFC 3339
	After                              string // the cursor of the page to read
	Limit                              int    // 0: the server's default
}

// parked reads one page of parked aggregates (GET /v1/parked).
func (c *client) parked(ctx context.Context, q parkedQuery) ([]byte, error) {
	v := url.Values{}
	for k, s := range map[string]string{"subscription": q.Subscription, "state": q.State, "aggregateType": q.AggregateType,
		"class": q.Class, "message": q.Message, "group": q.Group, "failedAfter": q.FailedAfter, "failedBefore": q.FailedBefore, "after": q.After} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return c.get(ctx, apiPath("parked"), v)
}

// parkedRecord reads the ledger record of one parked aggregate, with its
// history.
func (c *client) parkedRecord(ctx context.Context, sub, aggType, aggID string) ([]byte, error) {
	return c.get(ctx, apiPath("subscriptions", sub, "parked", aggType, aggID), nil)
}

// resume resumes a parked aggregate.
func (c *client) resume(ctx context.Context, sub, aggType, aggID, reason string) ([]byte, error) {
	return c.postJSON(ctx, apiPath("subscriptions", sub, "parked", aggType, aggID, "resume"), wire.OperatorRequest{Reason: reason})
}

// skip skips the events a parked aggregate held back, through throughVersion
// (0: all of them).
func (c *client) skip(ctx context.Context, sub, aggType, aggID string, throughVersion uint64, reason string) ([]byte, error) {
	return c.postJSON(ctx, apiPath("subscriptions", sub, "parked", aggType, aggID, "skip"), wire.OperatorRequest{Reason: reason, ThroughVersion: throughVersion})
}

// isUnreachable reports whether err means the server gave no answer.
func isUnreachable(err error) bool {
	var u *unreachableError
	return errors.As(err, &u)
}
