package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// restartKeys returns the keys (as [Changes] writes them, or a table whose every key is meant) that the
// running host cannot apply on reload: the listener, the data directory, the store backend, its
// NATS connection and the host's place in the cluster, the partitioning, concurrency,
// checkpointing and outage detection of the subscription engine, the sandbox and its capsules, and the
// log format.
func restartKeys() []string {
	return []string{
		"server.listen",
		"server.data-dir",
		"server.read-timeout",
		"server.write-timeout",
		"store.backend",
		"store.sync",
		"store.jetstream",
		"cluster",
		"subscription.partitions",
		"subscription.concurrency",
		"subscription.checkpoint-every",
		"subscription.checkpoint-interval",
		"subscription.systemic",
		"sandbox",
		"capsule",
		"tracing",
		"log.format",
	}
}

// NeedsRestart reports whether a change of key (as [Changes] writes it) takes effect only after a
// restart. Everything else applies on reload: retry and parked settings to the next attempt, tokens and
// webhooks to the next request or delivery, module settings when the module is next loaded.
func NeedsRestart(key string) bool {
	for _, k := range restartKeys() {
		if key == k || strings.HasPrefix(key, k+".") {
			return true
		}
	}
	return false
}

// Diff returns the changed keys, from old to new, that need a restart to take effect (see
// [NeedsRestart]), sorted, so that a host that reloaded new can warn about them. The host keeps running
// with the old value of these keys until it restarts.
func Diff(old, new *Config) []string {
	var out []string
	for _, k := range Changes(old, new) {
		if NeedsRestart(k) {
			out = append(out, k)
		}
	}
	return out
}

// Changes returns every key whose value differs between old and new, sorted, as `server.listen`,
// `subscriptions."A.b".retry.max-attempts` or `webhooks[0].url`; a table or array element that exists on
// one side only is listed by each of its keys. It never includes values, so secrets do not leak to logs.
func Changes(old, new *Config) []string {
	a, b := flatten(old), flatten(new)
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// flatten returns every leaf key of c with its value rendered; map entries and array elements of tables
// are walked, other values are leaves.
func flatten(c *Config) map[string]string {
	m := map[string]string{}
	if c == nil {
		return m
	}
	var walk func(p keyPath, v reflect.Value)
	walk = func(p keyPath, v reflect.Value) {
		switch {
		case v.Kind() == reflect.Struct:
			t := v.Type()
			for i := range t.NumField() {
				if tag := tomlTag(t.Field(i)); tag != "" {
					walk(p.key(tag), v.Field(i))
				}
			}
		case v.Kind() == reflect.Map && v.Type().Elem().Kind() == reflect.Struct:
			for _, k := range v.MapKeys() {
				walk(p.key(k.String()), v.MapIndex(k))
			}
		case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Struct:
			for i := range v.Len() {
				walk(p.at(i), v.Index(i))
			}
		case v.Kind() == reflect.Pointer: // an optional value: compared by what it points to
			if v.IsNil() {
				m[p.String()] = "<unset>"
			} else {
				walk(p, v.Elem())
			}
		default:
			m[p.String()] = fmt.Sprintf("%#v", v.Interface())
		}
	}
	walk(nil, reflect.ValueOf(c).Elem())
	return m
}
