package abi

import "fmt"

// Reply status codes: how a host call went. The codes are stable; guests map
// them to errors of their own.
const (
	ReplyOK           = 0 // done; Body holds the call's answer
	ReplyNotFound     = 1 // e.g. kv_get of a missing key, config_get of an unset key
	ReplyDenied       = 2 // e.g. an outbound host that is not allowed
	ReplyRefused      = 3 // the connection was refused (a systemic failure)
	ReplyTimeout      = 4 // the call's deadline ran out
	ReplyUnsupported  = 5 // this host does not offer the port to this processor
	ReplyError        = 6 // any other failure; Message says what
	ReplyTooLarge     = 7 // the answer exceeded the host's size cap
	ReplyBackpressure = 8 // the host's side is busy; RetryAfterMillis may be set
)

// Reply is the answer to a host call, fetched with take_reply.
type Reply struct {
	Code             uint8
	Message          string
	RetryAfterMillis uint64
	Body             []byte
}

// AppendReply appends the encoding of r to buf.
func AppendReply(buf []byte, r *Reply) []byte {
	e := Encoder{buf: buf}
	e.Uint(uint64(r.Code))
	e.String(r.Message)
	e.Uint(r.RetryAfterMillis)
	e.Blob(r.Body)
	return e.buf
}

// DecodeReply decodes a Reply; Body aliases b.
func DecodeReply(b []byte) (Reply, error) {
	d := NewDecoder(b)
	r := Reply{Code: d.Byte(), Message: d.String(), RetryAfterMillis: d.Uint(), Body: d.Blob()}
	return r, d.Done()
}

// Header is one HTTP header line.
type Header struct{ Name, Value string }

// HTTPRequest is the request of http_request.
type HTTPRequest struct {
	Method  string
	URL     string
	Headers []Header
	Body    []byte
}

// HTTPResponse is the Body of an OK reply to http_request.
type HTTPResponse struct {
	Status  uint32
	Headers []Header
	Body    []byte
}

func appendHeaders(e *Encoder, hs []Header) {
	e.Uint(uint64(len(hs)))
	for _, h := range hs {
		e.String(h.Name)
		e.String(h.Value)
	}
}

func decodeHeaders(d *Decoder) []Header {
	n := d.count()
	if n == 0 {
		return nil
	}
	hs := make([]Header, 0, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		hs = append(hs, Header{Name: d.String(), Value: d.String()})
	}
	return hs
}

// AppendHTTPRequest appends the encoding of r to buf.
func AppendHTTPRequest(buf []byte, r *HTTPRequest) []byte {
	e := Encoder{buf: buf}
	e.String(r.Method)
	e.String(r.URL)
	appendHeaders(&e, r.Headers)
	e.Blob(r.Body)
	return e.buf
}

// DecodeHTTPRequest decodes an HTTPRequest; Body aliases b.
func DecodeHTTPRequest(b []byte) (HTTPRequest, error) {
	d := NewDecoder(b)
	r := HTTPRequest{Method: d.String(), URL: d.String(), Headers: decodeHeaders(d), Body: d.Blob()}
	return r, d.Done()
}

// AppendHTTPResponse appends the encoding of r to buf.
func AppendHTTPResponse(buf []byte, r *HTTPResponse) []byte {
	e := Encoder{buf: buf}
	e.Uint(uint64(r.Status))
	appendHeaders(&e, r.Headers)
	e.Blob(r.Body)
	return e.buf
}

// DecodeHTTPResponse decodes an HTTPResponse; Body aliases b.
func DecodeHTTPResponse(b []byte) (HTTPResponse, error) {
	d := NewDecoder(b)
	r := HTTPResponse{Status: d.Uint32(), Headers: decodeHeaders(d), Body: d.Blob()}
	return r, d.Done()
}

// KVPut is the request of kv_put.
type KVPut struct {
	Key   string
	Value []byte
}

// AppendKVPut appends the encoding of p to buf.
func AppendKVPut(buf []byte, p *KVPut) []byte {
	e := Encoder{buf: buf}
	e.String(p.Key)
	e.Blob(p.Value)
	return e.buf
}

// DecodeKVPut decodes a KVPut; Value aliases b.
func DecodeKVPut(b []byte) (KVPut, error) {
	d := NewDecoder(b)
	p := KVPut{Key: d.String(), Value: d.Blob()}
	return p, d.Done()
}

// Command is the request of send_command: a command a saga derived.
type Command struct {
	AggregateType string
	AggregateID   string
	Type          string
	Payload       []byte
}

// AppendCommand appends the encoding of c to buf.
func AppendCommand(buf []byte, c *Command) []byte {
	e := Encoder{buf: buf}
	e.String(c.AggregateType)
	e.String(c.AggregateID)
	e.String(c.Type)
	e.Blob(c.Payload)
	return e.buf
}

// DecodeCommand decodes a Command; Payload aliases b.
func DecodeCommand(b []byte) (Command, error) {
	d := NewDecoder(b)
	c := Command{AggregateType: d.String(), AggregateID: d.String(), Type: d.String(), Payload: d.Blob()}
	if err := d.Done(); err != nil {
		return c, err
	}
	if c.AggregateType == "" || c.AggregateID == "" || c.Type == "" {
		return c, fmt.Errorf("abi: command needs aggregate type, aggregate id and type")
	}
	return c, nil
}
