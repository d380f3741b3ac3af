package config

import (
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/berthhq/berth/retry"
	"github.com/berthhq/berth/webhook"
)

// Each part's options come from the keys that set them.
func TestPartOptions(t *testing.T) {
	c, err := Parse([]byte(`
[server]
data-dir = "/srv/berth"

[store]
min-free = "1GiB"

[subscription]
partitions = 3
concurrency = 2
checkpoint-every = 7
checkpoint-interval = "50ms"

[subscription.retry]
max-attempts = 4
unrecoverable = ["Bad"]

[subscription.parked]
max-retries = 2

[subscription.systemic]
aggregates = 5
window = "1m"

[[classifier.rules]]
class = "Flaky"
as = "unrecoverable"

[[webhooks]]
name = "ops"
url = "https://hooks.example.com/berth"
secret = "k"
events = ["parked"]
subscriptions = ["A.b"]
`), "berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	eng, err := c.EngineOptions()
	if err != nil {
		t.Fatal(err)
	}
	if eng.Partitions != 3 || eng.Concurrency != 2 || eng.CheckpointEvery != 7 || eng.CheckpointInterval != 50*time.Millisecond ||
		eng.Retry.MaxAttempts != 4 || !reflect.DeepEqual(eng.Retry.Unrecoverable, []string{"Bad"}) ||
		eng.Parked.MaxRetries != 2 || eng.Systemic != (retry.SystemicWindow{Aggregates: 5, Window: time.Minute}) {
		t.Errorf("EngineOptions() = %+v", eng)
	}
	if d := retry.Classify(&retry.Failure{Classes: []string{"Flaky"}}, &retry.Policy{}, eng.Classifier); d.Class != retry.Unrecoverable {
		t.Errorf("the classifier takes Flaky for %v, want unrecoverable", d.Class)
	}
	if d := c.DiskOptions(); d.Reserve != 1<<30 || d.ReserveName != "store.min-free" {
		t.Errorf("DiskOptions() = %+v", d)
	}
	want := []webhook.Hook{{Name: "ops", URL: "https://hooks.example.com/berth", Secret: "k", Events: []string{"parked"}, Subscriptions: []string{"A.b"}}}
	if got := c.Hooks(); !reflect.DeepEqual(got, want) {
		t.Errorf("Hooks() = %+v, want %+v", got, want)
	}
	dirs := []struct{ got, want string }{
		{c.EventLogDir(), "events"},
		{c.LedgerDir(), "ledger"},
		{c.ModulesDir(), "modules"},
		{c.WasmCacheDir(), "wasm-cache"},
		{c.Sandbox().CacheDir, "wasm-cache"},
	}
	for _, d := range dirs {
		if d.got != filepath.Join("/srv/berth", d.want) {
			t.Errorf("%s, want it in /srv/berth/%s", d.got, d.want)
		}
	}
}
