package hostspec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/textproto"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/berthhq/berth/guest-sdk/berth"
)

// call is what the shared sandbox's transport and logger need of the call
// they serve; it travels in the context given to InvokeWith, which the
// sandbox hands on to outbound requests and log lines.
type call struct {
	ports berth.Ports
	t     testing.TB
}

type callKey struct{}

func callFrom(ctx context.Context) *call {
	c, _ := ctx.Value(callKey{}).(*call)
	return c
}

// transport is the sandbox's http.RoundTripper: it answers a request with
// the delivery's HTTP port (the spec's FakeHTTP) and turns its errors into
// those the sandbox classifies as the host's ports do.
type transport struct{}

func (transport) RoundTrip(req *http.Request) (*http.Response, error) {
	c := callFrom(req.Context())
	if req.Body != nil {
		defer req.Body.Close()
	}
	if c == nil {
		return nil, errors.New("hostspec: a request outside a spec's call")
	}
	r := &berth.Request{Method: req.Method, URL: req.URL.String()}
	if req.Body != nil {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		if len(body) > 0 {
			r.Body = body
		}
	}
	if len(req.Header) > 0 {
		r.Header = make(map[string]string, len(req.Header))
		for k, vs := range req.Header {
			r.Header[k] = strings.Join(vs, ", ")
		}
	}
	resp, err := c.ports.HTTP.Do(r)
	if err != nil {
		return nil, transportError(err)
	}
	out := &http.Response{
		Status:        fmt.Sprintf("%d %s", resp.Status, http.StatusText(resp.Status)),
		StatusCode:    resp.Status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        make(http.Header, len(resp.Header)),
		Body:          io.NopCloser(bytes.NewReader(resp.Body)),
		ContentLength: int64(len(resp.Body)),
		Request:       req,
	}
	for k, v := range resp.Header {
		out.Header.Set(textproto.CanonicalMIMEHeaderKey(k), v)
	}
	return out, nil
}

// transportError turns an error of the HTTP port into what a real transport
// returns for the same: a refused connection the sandbox reports as refused,
// a wait that ran out as a timeout; anything else stays as it is.
func transportError(err error) error {
	switch {
	case errors.Is(err, berth.ClassConnectionRefused):
		return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	case errors.Is(err, berth.ClassWaitTimeout):
		return timeoutError{err}
	}
	return err
}

// timeoutError is a net.Error that timed out.
type timeoutError struct{ err error }

func (e timeoutError) Error() string   { return e.err.Error() }
func (e timeoutError) Unwrap() error   { return e.err }
func (e timeoutError) Timeout() bool   { return true }
func (e timeoutError) Temporary() bool { return true }

var _ net.Error = timeoutError{}

// active holds the calls in flight by invocation key, for the lines the
// sandbox logs without the call's context (the guest's stdout and stderr).
var active struct {
	sync.Mutex
	calls map[string][]*call
}

// enter registers c as a call in flight under key until the returned func.
func enter(key string, c *call) (leave func()) {
	active.Lock()
	defer active.Unlock()
	if active.calls == nil {
		active.calls = map[string][]*call{}
	}
	active.calls[key] = append(active.calls[key], c)
	return func() {
		active.Lock()
		defer active.Unlock()
		cs := active.calls[key]
		for i := range cs {
			if cs[i] == c {
				cs = append(cs[:i], cs[i+1:]...)
				break
			}
		}
		if len(cs) == 0 {
			delete(active.calls, key)
		} else {
			active.calls[key] = cs
		}
	}
}

// byKey returns the latest call in flight under key.
func byKey(key string) *call {
	active.Lock()
	defer active.Unlock()
	if cs := active.calls[key]; len(cs) > 0 {
		return cs[len(cs)-1]
	}
	return nil
}

// logHandler is the shared sandbox's slog.Handler: a guest's log line goes
// to its delivery's logger (the spec's FakeLog, tagged with the invocation
// key, and the test's log); the guest's stdout and stderr go to the test's
// log. Lines of no spec's call (the sandbox's own) are dropped.
type logHandler struct{}

func (logHandler) Enabled(context.Context, slog.Level) bool { return true }

func (logHandler) Handle(ctx context.Context, rec slog.Record) error {
	var stream, text, key string
	var kv []any // the guest's own fields, as its native test kit records them
	rec.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "fields":
			for _, f := range a.Value.Group() {
				kv = append(kv, f.Key, f.Value.Any())
			}
		case "stream":
			stream = a.Value.String()
		case "text":
			text = a.Value.String()
		case "key":
			key = a.Value.String()
		}
		return true
	})
	c := callFrom(ctx)
	if c == nil && key != "" {
		c = byKey(key)
	}
	if c == nil {
		return nil
	}
	if stream != "" {
		c.t.Logf("%s %s: %s", key, stream, strings.TrimRight(text, "\n"))
		return nil
	}
	log := c.ports.Log
	if log == nil {
		return nil
	}
	switch {
	case rec.Level >= slog.LevelError:
		log.Error(rec.Message, kv...)
	case rec.Level >= slog.LevelWarn:
		log.Warn(rec.Message, kv...)
	case rec.Level >= slog.LevelInfo:
		log.Info(rec.Message, kv...)
	default:
		log.Debug(rec.Message, kv...)
	}
	return nil
}

func (h logHandler) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h logHandler) WithGroup(string) slog.Handler { return h }
