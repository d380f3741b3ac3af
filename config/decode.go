package config

import (
	"encoding"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berthhq/berth/internal/suggest"
)

// intSetter is implemented by text types that also take a TOML integer (a [Size] as a byte count).
type intSetter interface{ setTOMLInt(int64) error }

// defaulter is implemented by the tables that start from defaults when they appear in the file
// (a [ModuleConfig] under [modules.<name>]).
type defaulter interface{ setDefaults() }

// decoder fills a Config from the generic TOML tree (map[string]any as BurntSushi/toml decodes it),
// reporting every unknown key and bad value instead of stopping at the first.
type decoder struct {
	probs problems
}

// value decodes v, the TOML value at p, into rv (addressable).
func (d *decoder) value(p keyPath, v any, rv reflect.Value) {
	pt := rv.Addr().Interface()
	if is, ok := pt.(intSetter); ok {
		if n, ok := v.(int64); ok {
			if err := is.setTOMLInt(n); err != nil {
				d.probs.add(p, render(v), "%v", err)
			}
			return
		}
	}
	if tu, ok := pt.(encoding.TextUnmarshaler); ok {
		s, ok := v.(string)
		if !ok {
			d.probs.add(p, render(v), "want a string, got %s", tomlType(v))
			return
		}
		if err := tu.UnmarshalText([]byte(s)); err != nil {
			d.probs.add(p, render(v), "%s", innermost(err))
		}
		return
	}
	switch rv.Kind() {
	case reflect.Struct:
		d.table(p, v, rv)
	case reflect.Map:
		d.mapping(p, v, rv)
	case reflect.Slice:
		d.array(p, v, rv)
	case reflect.String:
		s, ok := v.(string)
		if !ok {
			d.probs.add(p, render(v), "want a string, got %s", tomlType(v))
			return
		}
		rv.SetString(s)
	case reflect.Bool:
		b, ok := v.(bool)
		if !ok {
			d.probs.add(p, render(v), "want true or false, got %s", tomlType(v))
			return
		}
		rv.SetBool(b)
	case reflect.Int, reflect.Int64, reflect.Int32:
		n, ok := v.(int64)
		if !ok {
			d.probs.add(p, render(v), "want an integer, got %s", tomlType(v))
			return
		}
		if rv.OverflowInt(n) {
			d.probs.add(p, render(v), "out of range")
			return
		}
		rv.SetInt(n)
	case reflect.Float64:
		// A TOML integer is a number too: recycle-growth = 2 means 2.0.
		switch x := v.(type) {
		case float64:
			rv.SetFloat(x)
		case int64:
			rv.SetFloat(float64(x))
		default:
			d.probs.add(p, render(v), "want a number, got %s", tomlType(v))
		}
	case reflect.Pointer:
		// An optional value (a *bool): set, it is decoded; left out, it stays nil (inherited).
		e := reflect.New(rv.Type().Elem())
		before := len(d.probs)
		d.value(p, v, e.Elem())
		if len(d.probs) == before {
			rv.Set(e)
		}
	default:
		panic(fmt.Sprintf("config: no decoding for %s at %s", rv.Type(), p))
	}
}

// table decodes a TOML table into a struct by the fields' toml tags.
func (d *decoder) table(p keyPath, v any, rv reflect.Value) {
	m, ok := v.(map[string]any)
	if !ok {
		d.probs.add(p, render(v), "want a table, got %s", tomlType(v))
		return
	}
	fields := tomlFields(rv.Type())
	for _, k := range sortedKeys(m) {
		i, ok := fields[k]
		if !ok {
			d.unknown(p.key(k), rv.Type(), fields)
			continue
		}
		d.value(p.key(k), m[k], rv.Field(i))
	}
}

// unknown reports an unknown key, suggesting the nearest known one.
func (d *decoder) unknown(p keyPath, t reflect.Type, fields map[string]int) {
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	slices.Sort(names)
	hint := ""
	name := p[len(p)-1].name
	switch {
	case len(p) == 3 && p[0].name == "subscriptions" && !p[0].isIndex:
		hint = fmt.Sprintf(`a subscription name with a dot must be quoted: [subscriptions."%s.%s"]`, p[1].name, name)
	case suggest.Closest(name, names) != "":
		hint = "did you mean " + suggest.Closest(name, names) + "?"
	case len(names) > 0:
		hint = "known keys here: " + strings.Join(names, ", ")
	}
	d.probs = append(d.probs, &Error{Key: p.String(), Problem: hint, Unknown: true})
}

// mapping decodes a TOML table with names chosen by the user into a map[string]T.
func (d *decoder) mapping(p keyPath, v any, rv reflect.Value) {
	m, ok := v.(map[string]any)
	if !ok {
		d.probs.add(p, render(v), "want a table, got %s", tomlType(v))
		return
	}
	if rv.IsNil() {
		rv.Set(reflect.MakeMapWithSize(rv.Type(), len(m)))
	}
	et := rv.Type().Elem()
	for _, k := range sortedKeys(m) {
		e := reflect.New(et).Elem()
		if old := rv.MapIndex(reflect.ValueOf(k)); old.IsValid() {
			e.Set(old)
		} else if df, ok := e.Addr().Interface().(defaulter); ok {
			df.setDefaults()
		}
		d.value(p.key(k), m[k], e)
		rv.SetMapIndex(reflect.ValueOf(k), e)
	}
}

// array decodes a TOML array (or array of tables) into a slice; an empty array gives an empty, non-nil
// slice (which, in a retry override, clears the inherited list).
func (d *decoder) array(p keyPath, v any, rv reflect.Value) {
	var items []any
	switch a := v.(type) {
	case []any:
		items = a
	case []map[string]any:
		items = make([]any, len(a))
		for i := range a {
			items[i] = a[i]
		}
	default:
		d.probs.add(p, render(v), "want an array, got %s", tomlType(v))
		return
	}
	out := reflect.MakeSlice(rv.Type(), len(items), len(items))
	for i, it := range items {
		e := out.Index(i)
		if df, ok := e.Addr().Interface().(defaulter); ok {
			df.setDefaults()
		}
		d.value(p.at(i), it, e)
	}
	rv.Set(out)
}

// tomlFields maps the toml tag of each field of struct type t to its index.
func tomlFields(t reflect.Type) map[string]int {
	m := map[string]int{}
	for i := range t.NumField() {
		if tag := tomlTag(t.Field(i)); tag != "" {
			m[tag] = i
		}
	}
	return m
}

// tomlTag returns the field's TOML key, "" for a field TOML does not see.
func tomlTag(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	tag, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
	if tag == "-" {
		return ""
	}
	return tag
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// innermost drops the wrapping of an error that already quotes the value ("retry: invalid duration
// \"x\": unknown unit" -> "unknown unit"), since the config error names the value itself.
func innermost(err error) string {
	if u, ok := err.(interface{ Unwrap() error }); ok && u.Unwrap() != nil {
		return u.Unwrap().Error()
	}
	return err.Error()
}

// tomlType names the TOML type of a decoded value.
func tomlType(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case []any, []map[string]any:
		return "an array"
	case map[string]any:
		return "a table"
	case time.Time:
		return "a date-time"
	}
	return fmt.Sprintf("%T", v)
}

// render writes a decoded TOML value back in TOML form, shortened.
func render(v any) string {
	var s string
	switch x := v.(type) {
	case string:
		s = strconv.Quote(x)
	case int64:
		s = strconv.FormatInt(x, 10)
	case float64:
		switch {
		case math.IsInf(x, 1):
			s = "inf"
		case math.IsInf(x, -1):
			s = "-inf"
		case math.IsNaN(x):
			s = "nan"
		default:
			s = strconv.FormatFloat(x, 'g', -1, 64)
		}
	case bool:
		s = strconv.FormatBool(x)
	case []any, []map[string]any:
		s = "[...]"
	case map[string]any:
		s = "{...}"
	case time.Time:
		s = x.Format(time.RFC3339Nano)
	default:
		s = fmt.Sprint(x)
	}
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}
