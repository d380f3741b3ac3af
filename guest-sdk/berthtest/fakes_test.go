package berthtest_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/guest-sdk/berth"
	"github.com/berthhq/berth/guest-sdk/berthtest"
	"github.com/berthhq/berth/wasm/abi"
)

func TestFakeHTTPScripts(t *testing.T) {
	errDown := errors.New("down")
	type answer struct {
		status int    // 0: an error
		body   string // the response body
		class  *berth.ErrorClass
		kind   abi.FailureKind
		after  time.Duration
	}
	tests := []struct {
		name   string
		script func(*berthtest.FakeHTTP)
		urls   []string
		want   []answer
		sent   int
	}{
		{"nothing scripted answers 200", func(*berthtest.FakeHTTP) {}, []string{"http://a"}, []answer{{status: 200}}, 1},
		{"failures come first, one each", func(f *berthtest.FakeHTTP) {
			f.Respond(berthtest.Reply(201, "made"))
			f.Fail(errDown, errDown)
		}, []string{"http://a", "http://a", "http://a", "http://a"}, []answer{{}, {}, {status: 201, body: "made"}, {status: 200}}, 2},
		{"per URL before any URL", func(f *berthtest.FakeHTTP) {
			f.Respond(berthtest.Reply(202, "any"))
			f.RespondTo("http://b", berthtest.Reply(404, "b"))
		}, []string{"http://a", "http://b", "http://b"}, []answer{{status: 202, body: "any"}, {status: 404, body: "b"}, {status: 200}}, 3},
		{"refused is systemic", func(f *berthtest.FakeHTTP) { f.FailRefused() },
			[]string{"http://a"}, []answer{{class: berth.ClassConnectionRefused, kind: abi.KindSystemic}}, 0},
		{"timeout is backpressure", func(f *berthtest.FakeHTTP) { f.FailTimeout(3 * time.Second) },
			[]string{"http://a"}, []answer{{class: berth.ClassWaitTimeout, kind: abi.KindBackpressure, after: 3 * time.Second}}, 0},
		{"denied", func(f *berthtest.FakeHTTP) { f.FailDenied() },
			[]string{"http://a"}, []answer{{class: berth.ClassOutboundDenied}}, 0},
		{"default answers the rest", func(f *berthtest.FakeHTTP) {
			f.Respond(berthtest.Reply(200, "first"))
			f.Default = func(r *berth.Request) (*berth.Response, error) {
				if strings.HasSuffix(r.URL, "/err") {
					return nil, errDown
				}
				return berthtest.Reply(418, r.URL), nil
			}
		}, []string{"http://a", "http://a", "http://a/err"}, []answer{{status: 200, body: "first"}, {status: 418, body: "http://a"}, {}}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &berthtest.FakeHTTP{}
			tt.script(f)
			for i, url := range tt.urls {
				resp, err := f.Do(&berth.Request{URL: url})
				w := tt.want[i]
				if w.status == 0 {
					var e *berth.Error
					switch {
					case err == nil:
						t.Fatalf("request %d: want an error, got %d", i, resp.Status)
					case w.class == nil && !errors.Is(err, errDown):
						t.Errorf("request %d: err = %v, want %v", i, err, errDown)
					case w.class != nil && (!errors.As(err, &e) || e.Class != w.class || e.Kind != w.kind || e.RetryAfter != w.after):
						t.Errorf("request %d: err = %#v, want class %s kind %s after %v", i, err, w.class.Name(), w.kind, w.after)
					case w.class != nil && !strings.HasPrefix(err.Error(), "GET "+url+": "):
						t.Errorf("request %d: message %q does not name the call", i, err)
					}
					continue
				}
				if err != nil || resp.Status != w.status || string(resp.Body) != w.body {
					t.Errorf("request %d: %+v, %v; want %d %q", i, resp, err, w.status, w.body)
				}
			}
			if got := len(f.Requests()); got != len(tt.urls) {
				t.Errorf("%d requests recorded, want %d", got, len(tt.urls))
			}
			if got := len(f.Sent()); got != tt.sent {
				t.Errorf("%d sent, want %d", got, tt.sent)
			}
		})
	}
}

func TestFakeHTTPKeepsWhatItWasGiven(t *testing.T) {
	f := &berthtest.FakeHTTP{}
	scripted := berthtest.Reply(429, "slow", "retry-after", "2")
	f.Respond(scripted, scripted)
	req := &berth.Request{Method: "PUT", URL: "http://a", Header: map[string]string{"X": "1"}, Body: []byte("b")}
	resp, _ := f.Do(req)
	if resp.Header["Retry-After"] != "2" {
		t.Fatalf("header = %v, want Retry-After canonical", resp.Header)
	}
	resp.Header["Retry-After"] = "9"
	resp.Body[0] = 'X'
	req.Header["X"] = "changed"
	req.Body[0] = 'c'
	again, _ := f.Do(&berth.Request{URL: "http://a"})
	got := f.Requests()
	if again.Header["Retry-After"] != "2" || string(again.Body) != "slow" {
		t.Errorf("the script changed with the response handed out: %+v", again)
	}
	if got[0].Method != "PUT" || got[0].Header["X"] != "1" || string(got[0].Body) != "b" || got[1].Method != "GET" {
		t.Errorf("recorded requests = %+v", got)
	}
}

func TestReplyPanicsOnAHeaderWithoutValue(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	//lint:ignore SA5012 a header without its value is what this test sends.
	berthtest.Reply(200, "", "Retry-After")
}

// saga reserves stock for an order, then fails if the payload says so.
func saga() *berth.Processor {
	p := &berth.Processor{Name: "OrderSaga", Kind: berth.Saga}
	return p.On("onOrderPlaced", "OrderPlaced", func(c *berth.Context) error {
		var order struct {
			Item string `json:"item"`
			Fail bool   `json:"fail"`
		}
		if err := c.Event.Decode(&order); err != nil {
			return err
		}
		err := c.Commands.Send(berth.Command{
			AggregateType: "Stock", AggregateID: order.Item, Type: "Reserve",
			Payload: []byte(`{"order": "` + c.Event.AggregateID + `", "qty": 1}`),
		})
		if err != nil {
			return err
		}
		if order.Fail {
			return errors.New("failed after sending")
		}
		return nil
	})
}

func TestSagaCommandsAreSentOnlyOnSuccess(t *testing.T) {
	spec := berthtest.New(t, saga())
	placed := func(fail bool) berthtest.Event {
		return berthtest.Event{Type: "OrderPlaced", AggregateID: "o-1", Payload: map[string]any{"item": "sku-9", "fail": fail}}
	}

	spec.WhenEvent(placed(true)).ExpectError().ExpectNoCommand()
	if sent := spec.Commands.Sent(); len(sent) != 0 {
		t.Fatalf("a failed attempt sent %+v", sent)
	}
	spec.WhenEvent(placed(false)).ExpectNoError().
		ExpectCommand(berthtest.Command{AggregateType: "Stock", AggregateID: "sku-9", Type: "Reserve", Payload: map[string]any{"qty": 1, "order": "o-1"}}).
		ExpectCommand(berthtest.Command{Type: "Reserve"})
	if sent := spec.Commands.Sent(); len(sent) != 1 || sent[0].AggregateID != "sku-9" {
		t.Fatalf("sent = %+v", sent)
	}

	spec.Commands.Fail(berthtest.Unsupported("no gateway"))
	spec.WhenEvent(placed(false)).ExpectErrorClass(berth.ClassUnsupported).ExpectNoCommand()

	r := &recorder{}
	mismatch := berthtest.New(r, saga())
	mismatch.WhenEvent(placed(false)).
		ExpectCommand(berthtest.Command{Type: "Reserve", Payload: map[string]any{"qty": 2}}).
		ExpectNoCommand()
	if len(r.errors) != 2 ||
		!strings.Contains(r.errors[0], `want a command Reserve to * * {"qty":2}, but it sent Reserve to Stock sku-9 {"order": "o-1", "qty": 1}`) ||
		!strings.Contains(r.errors[1], "want no command, but it sent Reserve to Stock sku-9") {
		t.Errorf("reports = %q", r.errors)
	}
}

func TestFakeCommandsAlone(t *testing.T) {
	c := &berthtest.FakeCommands{}
	var _ berth.CommandSender = c
	errRejected := errors.New("rejected")
	c.Fail(errRejected)
	ok := berth.Command{AggregateType: "A", AggregateID: "1", Type: "T"}
	if err := c.Send(ok); !errors.Is(err, errRejected) {
		t.Errorf("first send: %v", err)
	}
	if err := c.Send(ok); err != nil {
		t.Errorf("second send: %v", err)
	}
	if err := c.Send(berth.Command{Type: "T"}); !errors.Is(err, berth.ClassHost) {
		t.Errorf("a command without aggregate: %v", err)
	}
	if sent := c.Sent(); len(sent) != 1 {
		t.Errorf("sent = %+v", sent)
	}
}

// projection counts orders per buyer; "OrderCancelled" deletes the count,
// and a payload with fail writes first and fails after.
func projection() *berth.Processor {
	p := &berth.Processor{Name: "OrderSummary", Kind: berth.Projection}
	p.On("onOrderPlaced", "OrderPlaced", func(c *berth.Context) error {
		key := "orders/" + c.Event.OwnerID
		v, _, err := c.KV.Get(key)
		if err != nil {
			return err
		}
		n := len(v) + 1
		if err := c.KV.Put(key, []byte(strings.Repeat("x", n))); err != nil {
			return err
		}
		again, ok, err := c.KV.Get(key) // a delivery reads its own writes
		if err != nil || !ok || len(again) != n {
			return errors.New("the delivery does not read its own write")
		}
		if strings.Contains(string(c.Event.Payload), "fail") {
			return errors.New("failed after writing")
		}
		return nil
	})
	p.On("onOrderCancelled", "OrderCancelled", func(c *berth.Context) error {
		if err := c.KV.Delete("orders/" + c.Event.OwnerID); err != nil {
			return err
		}
		if _, ok, _ := c.KV.Get("orders/" + c.Event.OwnerID); ok {
			return errors.New("the delivery does not read its own delete")
		}
		return nil
	})
	return p
}

func TestProjectionWritesOnlyOnSuccess(t *testing.T) {
	spec := berthtest.New(t, projection())
	spec.KV.Set("orders/b-2", "xx")
	placed := berthtest.Event{Type: "OrderPlaced", OwnerID: "b-1"}

	spec.WhenEvent(placed).ExpectNoError().ExpectState("orders/b-1", "x")
	spec.WhenEvent(placed).ExpectNoError().ExpectState("orders/b-1", []byte("xx"))
	failing := placed
	failing.Payload = `"fail"`
	spec.WhenEvent(failing).ExpectError().ExpectState("orders/b-1", "xx")
	spec.KV.Fail(berthtest.TimedOut("kv get", time.Second))
	spec.WhenEvent(placed).ExpectBackpressure(time.Second).ExpectState("orders/b-1", "xx")
	spec.WhenEvent(berthtest.Event{Type: "OrderCancelled", OwnerID: "b-1"}).ExpectNoError().ExpectNoState("orders/b-1")
	if keys := spec.KV.Keys(); !slices.Equal(keys, []string{"orders/b-2"}) {
		t.Errorf("keys = %v", keys)
	}

	r := &recorder{}
	mismatch := berthtest.New(r, projection())
	mismatch.WhenEvent(placed).ExpectState("orders/b-1", "xy").ExpectState("orders/none", "x").ExpectNoState("orders/b-1")
	if len(r.errors) != 3 || !strings.Contains(r.errors[0], "want state orders/b-1 = xy, but it is x") ||
		!strings.Contains(r.errors[1], "want state orders/none = x, but it has none") ||
		!strings.Contains(r.errors[2], "want no state orders/b-1, but it is x") {
		t.Errorf("reports = %q", r.errors)
	}
}

func TestExpectStateComparesJSON(t *testing.T) {
	p := &berth.Processor{Name: "P", Kind: berth.Projection}
	p.On("h", "E", func(c *berth.Context) error { return c.KV.Put("k", []byte(`{ "b": [1, 2], "a": "x" }`)) })
	tests := []struct {
		want any
		ok   bool
	}{
		{map[string]any{"a": "x", "b": []int{1, 2}}, true},
		{`{"a":"x","b":[1,2]}`, true},
		{struct {
			A string `json:"a"`
			B []int  `json:"b"`
		}{"x", []int{1, 2}}, true},
		{map[string]any{"a": "x"}, false},
		{`not json`, false},
	}
	for _, tt := range tests {
		r := &recorder{}
		berthtest.New(r, p).WhenEvent(berthtest.Event{Type: "E"}).ExpectState("k", tt.want)
		if (len(r.errors) == 0) != tt.ok {
			t.Errorf("ExpectState(%v): reports %q, want ok=%v", tt.want, r.errors, tt.ok)
		}
	}
}

func TestFakeKVAlone(t *testing.T) {
	kv := &berthtest.FakeKV{}
	var _ berth.KV = kv
	errDown := errors.New("down")
	kv.Fail(errDown)
	if err := kv.Put("a", []byte("1")); !errors.Is(err, errDown) {
		t.Fatalf("put: %v", err)
	}
	if err := kv.Put("a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := kv.Get("a"); string(v) != "1" || !ok || err != nil {
		t.Fatalf("get: %q %v %v", v, ok, err)
	}
	if err := kv.Delete("a"); err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete("a"); err != nil {
		t.Fatalf("deleting a missing key: %v", err)
	}
	if _, ok, _ := kv.Get("a"); ok {
		t.Fatal("a is still there")
	}
	kv.Set("j", map[string]int{"n": 1})
	if v, _ := kv.Value("j"); string(v) != `{"n":1}` {
		t.Fatalf("set: %s", v)
	}
}

func TestFakeConfigAndLog(t *testing.T) {
	var c berth.Config = berthtest.FakeConfig{"url": "http://x"}
	if v, ok := c.Get("url"); v != "http://x" || !ok {
		t.Errorf("get url = %q %v", v, ok)
	}
	if _, ok := c.Get("nope"); ok {
		t.Error("an unset key is set")
	}
	l := &berthtest.FakeLog{}
	var _ berth.Logger = l
	l.Debug("d")
	l.Warn("w", "k", 1)
	lines := l.Lines()
	if len(lines) != 2 || lines[0].String() != "debug: d" || lines[1].String() != "warn: w k=1" {
		t.Errorf("lines = %q", lines)
	}
}
