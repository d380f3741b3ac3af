package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAppendBatchFile appends files of many commits with `events append
// --file`: a batch body, a JSON array and JSON lines go to POST
// /v1/events/batch, 1000 commits a request; a conflicting commit is
// reported by its place and aggregate, the others are appended, and the
// verb exits 1.
func TestAppendBatchFile(t *testing.T) {
	id := fmt.Sprintf("batch-%d", time.Now().UnixNano())
	commit := func(n, expected int) string {
		return fmt.Sprintf(`{"aggregateType":"Invoice","aggregateId":"%s-%d","expectedVersion":%d,"events":[{"type":"InvoiceSent"}]}`, id, n, expected)
	}
	var lines []string
	for n := range 1500 {
		lines = append(lines, commit(n, 0))
	}
	dir := t.TempDir()
	write := func(name, body string) string { return writeFile(t, dir, name, body) }
	jsonl := write("commits.jsonl", strings.Join(lines, "\n")+"\n")
	array := write("array.json", "["+commit(0, 1)+","+commit(1, 1)+"]")
	batch := write("batch.json", `{"appends":[`+commit(0, 2)+","+commit(1, 0)+","+commit(2, 1)+"]}")
	for _, s := range []step{
		{name: "JSON lines", args: []string{"events", "append", "--file", jsonl}, stdout: []string{"appended 1500 of 1500 commits"}},
		{name: "array", args: []string{"events", "append", "--file", array}, stdout: []string{"appended 2 of 2 commits"}},
		{name: "batch with a conflict", args: []string{"events", "append", "--file", batch}, code: exitFailed,
			stdout: []string{"appended 2 of 3 commits"}, stderr: []string{"append 2 (Invoice/" + id + "-1): Conflict (409)", "version conflict"}},
		{name: "bad JSON", args: []string{"events", "append", "--file", write("bad.jsonl", commit(5, 0)+"\n{")}, code: exitUsage, stderr: []string{"value 2 is not valid JSON"}},
		{name: "malformed commit", args: []string{"events", "append", "--file", write("bad.json", "["+commit(6, 0)+`,{"aggregateType":"Invoice"}]`)}, code: exitFailed,
			stderr: []string{"Bad Request (400)", "appends[1].aggregateId"}},
	} {
		t.Run(s.name, func(t *testing.T) { s.run(t, "") })
	}
	code, stdout, stderr := runCLI("", "events", "append", "--type", "Invoice", "--id", id+"-1499", "--expected-version", "1", "Paid={}")
	if code != exitOK || !strings.Contains(stdout, "version 2") {
		t.Errorf("the last commit of the JSON lines was not appended: exit %d\n%s%s", code, stdout, stderr)
	}
}

// writeFile writes body to dir/name and returns its path.
func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
