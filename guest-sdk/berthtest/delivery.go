package berthtest

import (
	"sync"

	"github.com/berthhq/berth/guest-sdk/berth"
)

// delivery is one WhenEvent: the ports the handler gets, which buffer a
// saga's commands and a projection's writes until the handler succeeded.
type delivery struct {
	spec *Spec
	key  string

	mu       sync.Mutex
	requests []berth.Request
	queued   []berth.Command
	writes   map[string]kvWrite
}

type kvWrite struct {
	value   []byte
	deleted bool
}

func (d *delivery) ports() berth.Ports {
	return berth.Ports{
		Log:      keyedLog{log: d.spec.Log, key: d.key, t: d.spec.t},
		HTTP:     deliveryHTTP{d},
		KV:       deliveryKV{d},
		Commands: deliveryCommands{d},
		Config:   d.spec.Config,
	}
}

// commit applies the buffered writes to the read model, as the host does
// after a success, and returns the queued commands, which the caller sends
// (Spec.send) in order.
func (d *delivery) commit() []berth.Command {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, w := range d.writes {
		if w.deleted {
			d.spec.KV.remove(k)
		} else {
			d.spec.KV.set(k, w.value)
		}
	}
	return d.queued
}

func (d *delivery) requestsMade() []berth.Request {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.requests
}

type deliveryHTTP struct{ d *delivery }

func (h deliveryHTTP) Do(req *berth.Request) (*berth.Response, error) {
	if req == nil {
		return nil, berth.ClassHost.New("http: nil request")
	}
	h.d.mu.Lock()
	h.d.requests = append(h.d.requests, copyRequest(req))
	h.d.mu.Unlock()
	return h.d.spec.HTTP.Do(req)
}

type deliveryKV struct{ d *delivery }

func (kv deliveryKV) supported(what string) error {
	if kv.d.spec.Processor.Kind != berth.Projection {
		return Unsupported(what + ": the key/value port is offered to projections only")
	}
	return kv.d.spec.KV.nextFailure()
}

func (kv deliveryKV) Get(key string) ([]byte, bool, error) {
	if err := kv.supported("kv get " + key); err != nil {
		return nil, false, err
	}
	kv.d.mu.Lock()
	w, ok := kv.d.writes[key]
	kv.d.mu.Unlock()
	if ok {
		if w.deleted {
			return nil, false, nil
		}
		return clone(w.value), true, nil
	}
	v, found := kv.d.spec.KV.Value(key)
	return v, found, nil
}

func (kv deliveryKV) Put(key string, value []byte) error {
	if err := kv.supported("kv put " + key); err != nil {
		return err
	}
	kv.d.mu.Lock()
	defer kv.d.mu.Unlock()
	if kv.d.writes == nil {
		kv.d.writes = map[string]kvWrite{}
	}
	kv.d.writes[key] = kvWrite{value: clone(value)}
	return nil
}

func (kv deliveryKV) Delete(key string) error {
	if err := kv.supported("kv delete " + key); err != nil {
		return err
	}
	kv.d.mu.Lock()
	defer kv.d.mu.Unlock()
	if kv.d.writes == nil {
		kv.d.writes = map[string]kvWrite{}
	}
	kv.d.writes[key] = kvWrite{deleted: true}
	return nil
}

type deliveryCommands struct{ d *delivery }

func (c deliveryCommands) Send(cmd berth.Command) error {
	if c.d.spec.Processor.Kind != berth.Saga {
		return Unsupported("send command " + cmd.Type + ": commands are accepted from sagas only")
	}
	if err := c.d.spec.Commands.check(cmd); err != nil {
		return err
	}
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	c.d.queued = append(c.d.queued, copyCommand(cmd))
	return nil
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}
