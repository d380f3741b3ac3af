package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// wrapWidth is the widest a table cell grows before it wraps onto more
// lines (unless --wide): an error message is never cut off.
const wrapWidth = 60

// table writes aligned columns; call flush when done.
type table struct {
	tw    *tabwriter.Writer
	width int // wrap cells wider than this; 0: never
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

// wrapAt makes the rows written from now on wrap cells wider than width
// characters onto continuation lines, under their column.
func (t *table) wrapAt(width int) { t.width = width }

// row writes one row; tabs and newlines in a cell are flattened so that
// they cannot break the alignment, and a cell wider than the table's width
// goes on over as many lines as it needs.
func (t *table) row(cells ...string) {
	lines := make([][]string, len(cells))
	height := 1
	for i, c := range cells {
		lines[i] = wrap(oneLine(c), t.width)
		height = max(height, len(lines[i]))
	}
	for l := range height {
		line := make([]string, len(cells))
		for i := range cells {
			if l < len(lines[i]) {
				line[i] = lines[i][l]
			}
		}
		fmt.Fprintln(t.tw, strings.Join(line, "\t"))
	}
}

func (t *table) flush() error { return t.tw.Flush() }

// wrap breaks s into lines of at most width characters, at spaces where it
// can and within a word longer than width where it must; width 0 keeps s
// whole.
func wrap(s string, width int) []string {
	if width <= 0 || utf8.RuneCountInString(s) <= width {
		return []string{s}
	}
	var lines []string
	var cur []rune
	for _, word := range strings.Fields(s) {
		w := []rune(word)
		if len(cur) > 0 && len(cur)+1+len(w) > width {
			lines, cur = append(lines, string(cur)), nil
		}
		if len(cur) > 0 {
			cur = append(cur, ' ')
		}
		cur = append(cur, w...)
		for len(cur) > width {
			lines, cur = append(lines, string(cur[:width])), cur[width:]
		}
	}
	if len(cur) > 0 {
		lines = append(lines, string(cur))
	}
	return lines
}

// keyValues writes a "key:  value" block with the values aligned.
type keyValues struct{ t *table }

func newKeyValues(w io.Writer) *keyValues { return &keyValues{newTable(w)} }

func (kv *keyValues) add(key string, format string, args ...any) {
	kv.t.row(key+":", fmt.Sprintf(format, args...))
}

func (kv *keyValues) flush() error { return kv.t.flush() }

// oneLine replaces tabs and line breaks by spaces.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\t\r\n") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

// truncate shortens s to at most n characters, ending with "…" when cut.
func truncate(s string, n int) string {
	s = oneLine(s)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// orDash shows an empty value as "-".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// timestamp formats t to the second in local time; "-" when zero.
func timestamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05 MST")
}

// relative says how far t is from now: "in 2m59s", "3s ago", "now".
func relative(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := t.Sub(now).Round(time.Second)
	switch {
	case d > 0:
		return "in " + d.String()
	case d < 0:
		return (-d).String() + " ago"
	}
	return "now"
}

// shortHash keeps the first 12 hex digits of a digest.
func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// byteSize formats n bytes in binary units.
func byteSize(n int) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := int64(n) / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
