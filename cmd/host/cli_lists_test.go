package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/berthhq/berth/api/wire"
)

// The verbs that page through lists and count before they act, against
// httptest servers that answer as a host would.

// TestParkedListPages: without --limit, parked list follows the server's
// cursor; --json merges the pages into one document of the same shape.
func TestParkedListPages(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := `{"subscription":"P.h","aggregateType":"Order","aggregateId":"%s","version":%d,"state":"waiting","error":{"message":"boom","kind":"recoverable"},"attempts":5}`
		switch r.URL.Query().Get("after") {
		case "":
			fmt.Fprintf(w, `{"records":[`+rec+`],"next":"c1"}`, "o-1", 1)
		case "c1":
			fmt.Fprintf(w, `{"records":[`+rec+`],"next":""}`, "o-2", 2)
		default:
			http.Error(w, "bad cursor", http.StatusBadRequest)
		}
	}))
	defer srv.Close()
	tests := []step{
		{name: "table", args: []string{"parked", "list"}, stdout: []string{"Order/o-1", "Order/o-2", "operator", "recoverable: boom"}},
		{name: "json", args: []string{"parked", "list", "--json"}, check: func(t *testing.T, stdout, _ string) {
			page := decodeJSON[struct {
				Records []wire.ParkedRecord
				Next    string
			}](t, stdout)
			if len(page.Records) != 2 || page.Records[1].AggregateID != "o-2" || page.Next != "" {
				t.Errorf("merged = %+v", page)
			}
		}},
		{name: "one page", args: []string{"parked", "list", "--limit", "1", "--json"}, stdout: []string{`"next":"c1"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, srv.URL) })
	}
}

// TestParkedListLimits: parked list prints the first 100 records unless
// told otherwise, following cursors past short pages (a host answers a
// broad filter with a bounded walk, maybe with no record); --limit N
// prints N, --all every one, and what is left is named with its cursor.
func TestParkedListLimits(t *testing.T) {
	const total = 300
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		from, _ := strconv.Atoi(r.URL.Query().Get("after"))
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		if limit == 0 {
			limit = 100
		}
		n := min(limit, 60, total-from)
		if from%7 == 3 {
			n = 0 // a walk that found nothing before its bound
		}
		var recs []string
		for i := from; i < from+n; i++ {
			recs = append(recs, fmt.Sprintf(`{"subscription":"P.h","aggregateType":"Order","aggregateId":"o-%03d","version":1,"state":"waiting","error":{"message":"boom","kind":"recoverable"},"attempts":5}`, i))
		}
		next := ""
		if from+n < total {
			next = strconv.Itoa(from + n + map[bool]int{true: 1, false: 0}[n == 0])
		}
		fmt.Fprintf(w, `{"records":[%s],"next":%q}`, strings.Join(recs, ","), next)
	}))
	defer srv.Close()
	rows := func(want int, last string) func(t *testing.T, stdout, _ string) {
		return func(t *testing.T, stdout, _ string) {
			if got := strings.Count(stdout, "Order/o-"); got != want || !strings.Contains(stdout, last) {
				t.Errorf("%d rows, want %d up to %s:\n%s", got, want, last, stdout)
			}
		}
	}
	for _, tt := range []step{
		{name: "default", args: []string{"parked", "list"}, stderr: []string{"more records: berth parked list --after ", "--all"}, check: rows(100, "o-099")},
		{name: "limit", args: []string{"parked", "list", "--limit", "150"}, check: rows(150, "o-149")},
		{name: "all", args: []string{"parked", "list", "--all"}, check: rows(total, "o-299")},
		{name: "all and limit", args: []string{"parked", "list", "--all", "--limit", "5"}, code: 2, stderr: []string{"--all and --limit"}},
	} {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, srv.URL) })
	}
}

// TestJobsYesCountsOnce: `jobs resume --yes` asks the host once, to create
// the job, whose count it prints; without --yes, a dry run counts first.
func TestJobsYesCountsOnce(t *testing.T) {
	var mu sync.Mutex
	var dry, created int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			DryRun bool `json:"dryRun"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		defer mu.Unlock()
		if req.DryRun {
			dry++
			fmt.Fprint(w, `{"matched":7,"sample":[]}`)
			return
		}
		created++
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"id":3,"action":"resume","state":"running","matched":7,"rate":100}`)
	}))
	defer srv.Close()
	step{name: "yes", args: []string{"jobs", "resume", "--class", "X", "--reason", "r", "--yes"},
		stdout: []string{"job 3: resume of 7 aggregate(s)"}}.run(t, srv.URL)
	if dry != 0 || created != 1 {
		t.Errorf("--yes: %d dry runs and %d creations, want 0 and 1", dry, created)
	}
}
