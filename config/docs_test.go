package config

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// schemaKeys returns every leaf key of the Config struct by its toml tags, with "<name>" for a name
// the user chooses (a map of tables) and "[]" for an element of an array of tables.
func schemaKeys() []string {
	var out []string
	var walk func(prefix string, t reflect.Type)
	walk = func(prefix string, t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := tomlTag(f)
			if tag == "" {
				continue
			}
			k := tag
			if prefix != "" {
				k = prefix + "." + tag
			}
			ft := f.Type
			switch {
			case ft.Kind() == reflect.Struct:
				walk(k, ft)
			case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
				walk(k+".<name>", ft.Elem())
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
				walk(k+"[]", ft.Elem())
			default:
				out = append(out, k)
			}
		}
	}
	walk("", reflect.TypeFor[Config]())
	slices.Sort(out)
	return out
}

// schemaKey normalizes a concrete key of a document to its schema key ("webhooks[1].url" ->
// "webhooks[].url"); ok is false for a key the schema does not have, and for tables (not leaves).
func schemaKey(p keyPath) (key string, ok bool) {
	t := reflect.TypeFor[Config]()
	var b strings.Builder
	for _, s := range p {
		switch {
		case t.Kind() == reflect.Struct && !s.isIndex:
			i, found := tomlFields(t)[s.name]
			if !found {
				return "", false
			}
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.name)
			t = t.Field(i).Type
		case t.Kind() == reflect.Map && t.Elem().Kind() == reflect.Struct && !s.isIndex:
			b.WriteString(".<name>")
			t = t.Elem()
		case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct && s.isIndex:
			b.WriteString("[]")
			t = t.Elem()
		case t.Kind() == reflect.Struct || t.Kind() == reflect.Map && t.Elem().Kind() == reflect.Struct ||
			t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
			return "", false
		default:
			return b.String(), true // below a leaf (a list element, a config value)
		}
	}
	leaf := t.Kind() != reflect.Struct && !(t.Kind() == reflect.Map && t.Elem().Kind() == reflect.Struct) &&
		!(t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct)
	return b.String(), leaf
}

// uncommentExamples turns the commented-out examples of DefaultTOML into TOML: lines like
// "# [table]", "# [[array]]" and "# key = value".
func uncommentExamples(text string) string {
	re := regexp.MustCompile(`(?m)^# ((\[\[?[a-z"])|([a-z][a-z-]* = ))`)
	return re.ReplaceAllString(text, "$1")
}

// docRows returns the key -> row cells of the tables of docs/config.md.
func docRows(t *testing.T) map[string][]string {
	t.Helper()
	data, err := os.ReadFile("../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	re := regexp.MustCompile("^\\| `([^`]+)` \\|")
	for _, line := range strings.Split(string(data), "\n") {
		m := re.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if _, dup := rows[m[1]]; dup {
			t.Errorf("docs/config.md documents %s twice", m[1])
		}
		rows[m[1]] = cells
	}
	return rows
}

func TestDocsListEveryKey(t *testing.T) {
	keys := schemaKeys()
	rows := docRows(t)
	for _, k := range keys {
		if _, ok := rows[k]; !ok {
			t.Errorf("key %s is in the Config struct but not in docs/config.md", k)
		}
	}
	for k, cells := range rows {
		if !slices.Contains(keys, k) {
			t.Errorf("docs/config.md documents %s, which the Config struct does not have", k)
			continue
		}
		if len(cells) != 5 {
			t.Errorf("docs/config.md: row of %s has %d cells, want 5 (key, type, default, applies, meaning)", k, len(cells))
			continue
		}
		want := "reload"
		if NeedsRestart(k) {
			want = "restart"
		}
		if cells[3] != want {
			t.Errorf("docs/config.md: %s applies on %q, but NeedsRestart says %q", k, cells[3], want)
		}
		if strings.TrimSpace(cells[4]) == "" {
			t.Errorf("docs/config.md: %s has no meaning", k)
		}
	}
}

func TestDefaultTOMLHasEveryKey(t *testing.T) {
	text := uncommentExamples(string(DefaultTOML()))
	// A value every secret key takes: a Standard Webhooks secret of 24 bytes.
	env := func(string) (string, bool) { return "whsec_c2VjcmV0LW9mLWFueS1lbnYta2V5LTI0Yg==", true }
	if _, err := parse([]byte(text), "examples.toml", env); err != nil {
		t.Fatalf("the uncommented examples of DefaultTOML do not parse:\n%v\n%s", err, text)
	}
	found := map[string]bool{}
	for _, p := range keyPaths(text) {
		if k, ok := schemaKey(p); ok {
			found[k] = true
		}
	}
	for _, k := range schemaKeys() {
		if !found[k] {
			t.Errorf("DefaultTOML lacks key %s (neither set nor in a commented example)", k)
		}
	}
}

// TestDefaultTOMLCommentsEveryKey checks that every key line of DefaultTOML has a comment line above
// it, except in the examples.
func TestDefaultTOMLCommentsEveryKey(t *testing.T) {
	lines := strings.Split(string(DefaultTOML()), "\n")
	key := regexp.MustCompile(`^[a-z][a-z-]* = `)
	for i, l := range lines {
		if key.MatchString(l) && (i == 0 || !strings.HasPrefix(lines[i-1], "# ")) {
			t.Errorf("DefaultTOML line %d (%s) has no comment above it", i+1, l)
		}
	}
}

// TestDocsDefaultsMatch checks the Default column of docs/config.md against DefaultTOML, which
// TestDefaultTOMLIsDefault checks against Default().
func TestDocsDefaultsMatch(t *testing.T) {
	text := string(DefaultTOML())
	lines := strings.Split(text, "\n")
	values := map[string]string{}
	for k, n := range keyLines(text) {
		if _, v, ok := strings.Cut(lines[n-1], " = "); ok && !strings.HasPrefix(lines[n-1], "#") {
			values[k] = v
		}
	}
	for k, cells := range docRows(t) {
		if len(cells) < 3 {
			continue
		}
		want, ok := values[k]
		if !ok {
			continue // a key with no default entry (tokens, overrides, modules, webhooks)
		}
		if got := strings.Trim(cells[2], "`"); got != want {
			t.Errorf("docs/config.md: %s defaults to %s, DefaultTOML says %s", k, got, want)
		}
	}
	// Module defaults are not in DefaultTOML's keys; check them against DefaultModule.
	rows := docRows(t)
	m := DefaultModule()
	for k, want := range map[string]string{
		"modules.<name>.memory-limit":  `"` + m.MemoryLimit.String() + `"`,
		"modules.<name>.init-timeout":  `"` + m.InitTimeout.String() + `"`,
		"modules.<name>.allowed-hosts": "[]",
		"modules.<name>.config":        "{}",
	} {
		if got := strings.Trim(rows[k][2], "`"); got != want {
			t.Errorf("docs/config.md: %s defaults to %s, DefaultModule says %s", k, got, want)
		}
	}
}

func TestDefaultTOMLIsDefault(t *testing.T) {
	c, err := Parse(DefaultTOML(), "default.toml")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, Default()) {
		t.Errorf("Parse(DefaultTOML()) = %+v\nwant Default() = %+v", c, Default())
	}
	if err := Default().Validate(); err != nil {
		t.Errorf("Default().Validate() = %v", err)
	}
	if ch := Changes(c, Default()); len(ch) != 0 {
		t.Errorf("Changes(Parse(DefaultTOML), Default()) = %v", ch)
	}
}
