package berthtest

import (
	"fmt"
	"net/textproto"
	"sync"
	"time"

	"github.com/berthhq/berth/guest-sdk/berth"
)

// FakeHTTP is the outbound HTTP port. It records every request and answers
// each one, in this order of precedence:
//
//  1. the next scripted failure (Fail, FailRefused, FailDenied, FailTimeout):
//     the request gets that error and no response, like a service that is
//     down;
//  2. the next response scripted for the request's URL (RespondTo);
//  3. the next response scripted for any URL (Respond);
//  4. Default, or 200 with an empty body if Default is nil.
//
// Each scripted failure or response answers one request. The zero value is
// ready to use and safe for concurrent use.
type FakeHTTP struct {
	// Default answers the requests nothing was scripted for; nil answers
	// 200 with an empty body.
	Default func(req *berth.Request) (*berth.Response, error)

	mu       sync.Mutex
	failures []func(req *berth.Request) error
	byURL    map[string][]*berth.Response
	queue    []*berth.Response
	requests []berth.Request
	answered []bool
}

// Fail makes the next requests fail with errs, one request each, before
// any response is given.
func (f *FakeHTTP) Fail(errs ...error) *FakeHTTP {
	for _, err := range errs {
		f.failWith(func(*berth.Request) error { return err })
	}
	return f
}

// FailRefused makes the next request fail as the host's port reports a
// refused connection: class berth.ClassConnectionRefused, systemic.
func (f *FakeHTTP) FailRefused() *FakeHTTP {
	return f.failWith(func(r *berth.Request) error { return Refused(r.Method + " " + r.URL) })
}

// FailDenied makes the next request fail as the host's port reports a host
// the module may not reach: class berth.ClassOutboundDenied.
func (f *FakeHTTP) FailDenied() *FakeHTTP {
	return f.failWith(func(r *berth.Request) error { return Denied(r.Method + " " + r.URL) })
}

// FailTimeout makes the next request fail as the host's port reports a
// wait that ran out: class berth.ClassWaitTimeout, backpressure with the
// retryAfter floor (0: none).
func (f *FakeHTTP) FailTimeout(retryAfter time.Duration) *FakeHTTP {
	return f.failWith(func(r *berth.Request) error { return TimedOut(r.Method+" "+r.URL, retryAfter) })
}

func (f *FakeHTTP) failWith(fn func(*berth.Request) error) *FakeHTTP {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures = append(f.failures, fn)
	return f
}

// Respond queues responses for the next requests to any URL, one each.
func (f *FakeHTTP) Respond(responses ...*berth.Response) *FakeHTTP {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queue = append(f.queue, responses...)
	return f
}

// RespondTo queues responses for the next requests to exactly url, one
// each; they come before those queued with Respond.
func (f *FakeHTTP) RespondTo(url string, responses ...*berth.Response) *FakeHTTP {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byURL == nil {
		f.byURL = map[string][]*berth.Response{}
	}
	f.byURL[url] = append(f.byURL[url], responses...)
	return f
}

// Do records the request and answers it as scripted. A request without a
// method is a GET, as in the host.
func (f *FakeHTTP) Do(req *berth.Request) (*berth.Response, error) {
	if req == nil {
		return nil, berth.ClassHost.New("http: nil request")
	}
	r := copyRequest(req)
	f.mu.Lock()
	i := len(f.requests)
	f.requests = append(f.requests, r)
	f.answered = append(f.answered, false)
	resp, fail, def := f.next(&r)
	f.mu.Unlock()

	var err error
	switch {
	case fail != nil:
		err = fail(&r)
	case resp != nil:
	case def != nil:
		in := copyRequest(&r)
		resp, err = def(&in)
		if err == nil && resp == nil {
			resp = &berth.Response{Status: 200}
		}
	default:
		resp = &berth.Response{Status: 200}
	}
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.answered[i] = true
	f.mu.Unlock()
	return copyResponse(resp), nil
}

// next takes the scripted answer for r; the caller holds f.mu.
func (f *FakeHTTP) next(r *berth.Request) (*berth.Response, func(*berth.Request) error, func(*berth.Request) (*berth.Response, error)) {
	if len(f.failures) > 0 {
		fail := f.failures[0]
		f.failures = f.failures[1:]
		return nil, fail, nil
	}
	if q := f.byURL[r.URL]; len(q) > 0 {
		f.byURL[r.URL] = q[1:]
		return q[0], nil, nil
	}
	if len(f.queue) > 0 {
		resp := f.queue[0]
		f.queue = f.queue[1:]
		return resp, nil, nil
	}
	return nil, nil, f.Default
}

// Requests returns every request made so far, failed ones included, in order.
func (f *FakeHTTP) Requests() []berth.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]berth.Request(nil), f.requests...)
}

// Sent returns the requests that got a response, of any status: those that
// reached the service. A request answered with an error is not among them.
func (f *FakeHTTP) Sent() []berth.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	var sent []berth.Request
	for i, r := range f.requests {
		if f.answered[i] {
			sent = append(sent, r)
		}
	}
	return sent
}

// Reply builds a response with the status, the body and headers given as
// name, value pairs; names are canonicalised ("retry-after" becomes
// "Retry-After") as the host's port does. It panics on an odd number of
// header arguments.
func Reply(status int, body string, header ...string) *berth.Response {
	if len(header)%2 != 0 {
		panic(fmt.Sprintf("berthtest.Reply: header %q has no value", header[len(header)-1]))
	}
	resp := &berth.Response{Status: status, Header: make(map[string]string, len(header)/2)}
	if body != "" {
		resp.Body = []byte(body)
	}
	for i := 0; i < len(header); i += 2 {
		resp.Header[textproto.CanonicalMIMEHeaderKey(header[i])] = header[i+1]
	}
	return resp
}

func copyRequest(req *berth.Request) berth.Request {
	r := berth.Request{Method: req.Method, URL: req.URL, Body: clone(req.Body)}
	if r.Method == "" {
		r.Method = "GET"
	}
	if req.Header != nil {
		r.Header = make(map[string]string, len(req.Header))
		for k, v := range req.Header {
			r.Header[k] = v
		}
	}
	return r
}

func copyResponse(resp *berth.Response) *berth.Response {
	c := &berth.Response{Status: resp.Status, Header: make(map[string]string, len(resp.Header)), Body: clone(resp.Body)}
	for k, v := range resp.Header {
		c.Header[k] = v
	}
	return c
}
