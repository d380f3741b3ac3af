package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/berthhq/berth/api/wire"
)

// TestParkedGroupsTable: parked groups prints one line a group with its
// count, classes and module versions, following pages; --json merges
// them; parked list and jobs pass --group on as the group filter.
func TestParkedGroupsTable(t *testing.T) {
	var listedGroup string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g := `{"subscription":"P.h","group":"%s","message":"does not know buyer {}","classes":["UnknownBuyer"],"module":"notifier","count":%d,"firstFailure":"2026-12-06T04:00:00Z","lastFailure":"2026-12-06T04:10:00Z","modules":{"notifier v3":%d},"sampleType":"Order","sampleId":"o-1"}`
		switch {
		case r.URL.Path == "/v1/parked":
			listedGroup = r.URL.Query().Get("group")
			fmt.Fprint(w, `{"records":[],"next":""}`)
		case r.URL.Query().Get("after") == "":
			fmt.Fprintf(w, `{"groups":[`+g+`],"next":"1"}`, "aaaa000011112222", 27000, 27000)
		default:
			fmt.Fprintf(w, `{"groups":[`+g+`],"next":""}`, "bbbb000011112222", 3000, 3000)
		}
	}))
	defer srv.Close()
	for _, tt := range []step{
		{name: "table", args: []string{"parked", "groups"}, stdout: []string{"GROUP", "aaaa000011112222", "27000", "bbbb000011112222",
			"notifier v3 ×27000", "does not know buyer {}", "UnknownBuyer"}},
		{name: "json", args: []string{"parked", "groups", "--json"}, check: func(t *testing.T, stdout, _ string) {
			page := decodeJSON[wire.ParkedGroupPage](t, stdout)
			if len(page.Groups) != 2 || page.Groups[1].Count != 3000 || page.Next != "" {
				t.Errorf("merged = %+v", page)
			}
		}},
		{name: "list a group", args: []string{"parked", "list", "--group", "aaaa000011112222"}, check: func(t *testing.T, _, _ string) {
			if listedGroup != "aaaa000011112222" {
				t.Errorf("parked list --group asked for group %q", listedGroup)
			}
		}},
		{name: "bad state", args: []string{"parked", "groups", "--state", "asleep"}, code: 2, stderr: []string{"--state must be"}},
	} {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, srv.URL) })
	}
}
