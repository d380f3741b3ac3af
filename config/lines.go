package config

import (
	"strconv"
	"strings"
)

// keyPath is the full key of a value: table and key names, and array indices.
type keyPath []pathSeg

// pathSeg is one step of a keyPath: a key name, or (isIndex) an array index.
type pathSeg struct {
	name    string
	index   int
	isIndex bool
}

// maxNesting is the deepest a configuration may nest: arrays and inline
// tables within each other, or steps of one dotted key. No Berth setting
// needs more than a handful; a file nested deeper is refused before it is
// parsed (see tooDeep), because the TOML parser's work grows with the square
// of the depth for inline tables and dotted keys (seconds for 16 KiB), and so
// did this scanner's for every kind of nesting (gigabytes for 8,000 nested
// arrays). The scanner also records no key deeper than this (a deeper key
// takes the line of its ancestor at this depth, see lineOf), so its work is
// linear in the size of the file whatever it is given.
const maxNesting = 32

// key returns p with the key name added (a new slice; p is not modified);
// p itself at maxNesting.
func (p keyPath) key(name string) keyPath {
	if len(p) >= maxNesting {
		return p
	}
	return append(p[:len(p):len(p)], pathSeg{name: name})
}

// at returns p with the array index added (a new slice; p is not modified);
// p itself at maxNesting.
func (p keyPath) at(i int) keyPath {
	if len(p) >= maxNesting {
		return p
	}
	return append(p[:len(p):len(p)], pathSeg{index: i, isIndex: true})
}

// String renders the key as TOML writes it, with array indices: `webhooks[0].url`,
// `subscriptions."A.b".retry.timeout`.
func (p keyPath) String() string {
	var b strings.Builder
	for i, s := range p {
		if s.isIndex {
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(quoteKey(s.name))
	}
	return b.String()
}

// quoteKey returns name as a TOML key: bare when it can be, else a quoted string.
func quoteKey(name string) string {
	if name == "" {
		return `""`
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return strconv.Quote(name)
		}
	}
	return name
}

// lineOf returns the line of key in lines, or of its nearest parent that has one; 0 when none has.
// An index into a one-line array takes the array's line.
func lineOf(lines map[string]int, key string) int {
	for key != "" {
		if n, ok := lines[key]; ok {
			return n
		}
		key = parentKey(key)
	}
	return 0
}

// parentKey drops the last step of a rendered key ("a.b[2]" -> "a.b", "a.b" -> "a", `a."x.y"` -> "a").
func parentKey(key string) string {
	if strings.HasSuffix(key, "]") {
		if i := strings.LastIndexByte(key, '['); i >= 0 {
			return key[:i]
		}
	}
	inQuote := false
	last := -1
	for i := 0; i < len(key); i++ {
		switch c := key[i]; {
		case c == '\\' && inQuote:
			i++
		case c == '"':
			inQuote = !inQuote
		case c == '.' && !inQuote:
			last = i
		}
	}
	if last < 0 {
		return ""
	}
	return key[:last]
}

// keyLines returns the line of every key, table header and array element of a TOML document, keyed by
// the rendered keyPath. It assumes the document parsed (the TOML parser reports syntax errors); on
// anything it does not understand it skips to the next line, so it never fails, at worst it misses a key.
func keyLines(text string) map[string]int {
	s := &scanner{text: text, line: 1, lines: map[string]int{}, arrays: map[string]int{}}
	s.document()
	return s.lines
}

// keyPaths returns every key, table header and array element of a TOML document, in order (see
// keyLines).
func keyPaths(text string) []keyPath {
	s := &scanner{text: text, line: 1, lines: map[string]int{}, arrays: map[string]int{}}
	s.document()
	return s.paths
}

// tooDeep returns the line where text first nests deeper than maxNesting,
// 0 when it does not. It stops there, so its work is bounded by that depth
// and linear in the size of the text.
func tooDeep(text string) int {
	s := &scanner{text: text, line: 1, guard: true, arrays: map[string]int{}}
	s.document()
	return s.deepLine
}

type scanner struct {
	guard    bool // only looking for nesting deeper than maxNesting: records nothing
	nesting  int  // arrays and inline tables open around pos
	deepLine int  // the line where the nesting first went past maxNesting (and the scan stopped)
	text     string
	pos      int
	line     int
	lines    map[string]int
	arrays   map[string]int // rendered path of an array of tables -> elements so far
	table    keyPath        // the current table
	paths    []keyPath      // every key recorded, in order
}

func (s *scanner) eof() bool { return s.pos >= len(s.text) }

func (s *scanner) peek() byte {
	if s.eof() {
		return 0
	}
	return s.text[s.pos]
}

func (s *scanner) hasPrefix(p string) bool { return strings.HasPrefix(s.text[s.pos:], p) }

// tooDeepHere notes that the text nests past maxNesting at the current line
// and, when guarding, ends the scan.
func (s *scanner) tooDeepHere() {
	if s.deepLine == 0 {
		s.deepLine = s.line
	}
	if s.guard {
		s.pos = len(s.text)
	}
}

func (s *scanner) record(p keyPath, line int) {
	if s.guard {
		return
	}
	k := p.String()
	if _, ok := s.lines[k]; !ok {
		s.lines[k] = line
		s.paths = append(s.paths, p)
	}
}

// blank skips spaces and tabs; with newlines, also newlines and comments.
func (s *scanner) blank(newlines bool) {
	for !s.eof() {
		switch c := s.peek(); {
		case c == ' ' || c == '\t':
			s.pos++
		case c == '\r':
			s.pos++
		case c == '\n' && newlines:
			s.pos++
			s.line++
		case c == '#' && newlines:
			s.skipLine()
		default:
			return
		}
	}
}

// skipLine moves past the next newline (or to the end).
func (s *scanner) skipLine() {
	for !s.eof() && s.peek() != '\n' {
		s.pos++
	}
}

func (s *scanner) document() {
	for {
		s.blank(true)
		if s.eof() {
			return
		}
		start := s.pos
		switch {
		case s.hasPrefix("[["):
			s.pos += 2
			s.header(true)
		case s.peek() == '[':
			s.pos++
			s.header(false)
		default:
			s.keyValue(s.table)
		}
		if s.pos == start { // no progress: give up on this line
			s.skipLine()
		}
	}
}

// header reads a table header after its opening bracket(s).
func (s *scanner) header(array bool) {
	line := s.line
	keys, ok := s.keys()
	if !ok {
		s.skipLine()
		return
	}
	var p keyPath
	for i, k := range keys {
		if len(p) >= maxNesting {
			break // p is recorded already, and so are its arrays' elements
		}
		p = p.key(k)
		s.record(p, line) // an implicit parent table is first seen here
		last := i == len(keys)-1
		if n, isArray := s.arrays[p.String()]; isArray && !(last && array) {
			p = p.at(n - 1)
		}
	}
	if array {
		k := p.String()
		s.arrays[k]++
		p = p.at(s.arrays[k] - 1)
	}
	s.record(p, line)
	s.table = p
	s.skipLine()
}

// keyValue reads `key = value` in the table base.
func (s *scanner) keyValue(base keyPath) {
	line := s.line
	keys, ok := s.keys()
	if !ok || s.peek() != '=' {
		s.skipLine()
		return
	}
	s.pos++
	p := base
	for _, k := range keys {
		if len(p) >= maxNesting {
			break // p is recorded already
		}
		p = p.key(k)
		s.record(p, line)
	}
	s.blank(false)
	s.value(p)
}

// keys reads a dotted key and the blanks after it.
func (s *scanner) keys() ([]string, bool) {
	var keys []string
	for {
		s.blank(false)
		k, ok := s.simpleKey()
		if !ok {
			return nil, false
		}
		if keys = append(keys, k); len(keys) > maxNesting {
			s.tooDeepHere()
			return nil, false
		}
		s.blank(false)
		if s.peek() != '.' {
			break
		}
		s.pos++
	}
	if s.peek() == ']' {
		s.pos++
		if s.peek() == ']' {
			s.pos++
		}
	}
	s.blank(false)
	return keys, true
}

func (s *scanner) simpleKey() (string, bool) {
	switch s.peek() {
	case '"':
		raw := s.basicString()
		if v, err := strconv.Unquote(raw); err == nil {
			return v, true
		}
		return strings.Trim(raw, `"`), true
	case '\'':
		raw := s.literalString()
		return strings.Trim(raw, "'"), true
	}
	start := s.pos
	for !s.eof() {
		c := s.peek()
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			break
		}
		s.pos++
	}
	return s.text[start:s.pos], s.pos > start
}

// basicString reads "..." (one line, with escapes) and returns it with its quotes.
func (s *scanner) basicString() string {
	start := s.pos
	s.pos++
	for !s.eof() && s.peek() != '"' && s.peek() != '\n' {
		if s.peek() == '\\' {
			s.pos++
		}
		s.pos++
	}
	if !s.eof() && s.peek() == '"' {
		s.pos++
	}
	return s.text[start:min(s.pos, len(s.text))]
}

// literalString reads '...' and returns it with its quotes.
func (s *scanner) literalString() string {
	start := s.pos
	s.pos++
	for !s.eof() && s.peek() != '\'' && s.peek() != '\n' {
		s.pos++
	}
	if !s.eof() && s.peek() == '\'' {
		s.pos++
	}
	return s.text[start:s.pos]
}

// multiline skips a multi-line string whose opening delimiter (""" or ”') is at pos.
func (s *scanner) multiline(delim string, escapes bool) {
	s.pos += 3
	for !s.eof() {
		switch {
		case escapes && s.peek() == '\\':
			s.pos++
			if s.peek() == '\n' {
				s.line++
			}
			s.pos++
		case s.hasPrefix(delim):
			s.pos += 3
			for i := 0; i < 2 && s.peek() == delim[0]; i++ { // up to two quotes end the content
				s.pos++
			}
			return
		default:
			if s.peek() == '\n' {
				s.line++
			}
			s.pos++
		}
	}
}

// value skips the value of key p, recording the keys of inline tables and the array elements in it.
func (s *scanner) value(p keyPath) {
	switch {
	case s.hasPrefix(`"""`):
		s.multiline(`"""`, true)
	case s.hasPrefix(`'''`):
		s.multiline(`'''`, false)
	case s.peek() == '"':
		s.basicString()
	case s.peek() == '\'':
		s.literalString()
	case s.peek() == '[' || s.peek() == '{':
		s.nesting++
		defer func() { s.nesting-- }()
		if s.nesting > maxNesting {
			if s.tooDeepHere(); s.guard {
				return
			}
		}
		if s.peek() == '{' {
			s.inlineTable(p)
			return
		}
		s.pos++
		for i := 0; ; i++ {
			s.blank(true)
			if s.eof() || s.peek() == ']' {
				s.pos++
				return
			}
			if len(p) < maxNesting { // else p.at(i) is p, recorded already
				s.record(p.at(i), s.line)
			}
			start := s.pos
			s.value(p.at(i))
			s.blank(true)
			if s.peek() == ',' {
				s.pos++
			} else if s.pos == start {
				s.skipLine()
				return
			}
		}
	default: // a number, a boolean or a date: up to the next delimiter
		for !s.eof() && !strings.ContainsRune(",]}#\r\n", rune(s.peek())) {
			s.pos++
		}
	}
}

// inlineTable skips the inline table of key p at pos, recording its keys.
func (s *scanner) inlineTable(p keyPath) {
	s.pos++
	for {
		s.blank(true)
		if s.eof() || s.peek() == '}' {
			s.pos++
			return
		}
		start := s.pos
		s.keyValue(p)
		s.blank(true)
		if s.peek() == ',' {
			s.pos++
		} else if s.pos == start {
			s.skipLine()
			return
		}
	}
}
