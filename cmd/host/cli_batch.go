package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/berthhq/berth/api/wire"
)

// batchSize is how many appends one POST /v1/events/batch of the CLI
// carries: the API's most (api's maxBatchAppends).
const batchSize = 1000

// fileAppends reads the appends of an --file body: a document of one
// commit (POST /v1/events's body) gives ok false; a batch's body
// ({"appends": [...]}), a JSON array of commits, or commits one after
// another (JSON lines) give the commits, each as written.
func fileAppends(body []byte) (appends []json.RawMessage, ok bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	var values []json.RawMessage
	for {
		var v json.RawMessage
		if err := dec.Decode(&v); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, false, usagef("--file: value %d is not valid JSON: %v", len(values)+1, err)
		}
		values = append(values, v)
	}
	switch {
	case len(values) == 0:
		return nil, false, usagef("--file holds no JSON")
	case len(values) > 1:
		return values, true, nil
	}
	v := bytes.TrimSpace(values[0])
	if v[0] == '[' {
		if err := json.Unmarshal(v, &appends); err != nil {
			return nil, false, usagef("--file: %v", err)
		}
		return appends, true, nil
	}
	var batch struct {
		Appends []json.RawMessage `json:"appends"`
	}
	if v[0] != '{' || json.Unmarshal(v, &batch) != nil || batch.Appends == nil {
		return nil, false, nil // one commit: the server judges it
	}
	return batch.Appends, true, nil
}

// appendBatches posts appends in batches of batchSize, one after another,
// and prints each failed append and a summary (with --json, each batch's
// answer, one a line). Any append not appended makes the verb fail.
func appendBatches(x *invocation, appends []json.RawMessage) error {
	appended, failed := 0, 0
	for start := 0; start < len(appends); start += batchSize {
		chunk := appends[start:min(start+batchSize, len(appends))]
		body, err := json.Marshal(struct {
			Appends []json.RawMessage `json:"appends"`
		}{chunk})
		if err != nil {
			return err
		}
		_, raw, err := x.client.do(x.ctx, http.MethodPost, apiPath("events", "batch"), nil, "application/json", body)
		if err != nil {
			if appended+failed > 0 {
				fmt.Fprintf(x.stderr, "appends %d to %d were not sent or not answered; %d before them were appended, %d not\n",
					start+1, len(appends), appended, failed)
			}
			return err
		}
		if x.global.json {
			if err := x.printJSON(raw); err != nil {
				return err
			}
		}
		var res wire.BatchAppendResult
		if err := decode(raw, &res); err != nil {
			return err
		}
		for i, r := range res.Results {
			if r.Status == http.StatusCreated || x.global.json {
				continue
			}
			detail := ""
			if r.Problem != nil {
				detail = r.Problem.Detail
			}
			fmt.Fprintf(x.stderr, "append %d (%s/%s): %s (%d): %s\n", start+i+1, r.AggregateType, r.AggregateID,
				http.StatusText(r.Status), r.Status, detail)
		}
		appended, failed = appended+res.Appended, failed+res.Failed
	}
	if !x.global.json {
		fmt.Fprintf(x.stdout, "appended %d of %d commits\n", appended, len(appends))
	}
	if failed > 0 {
		return exitError{code: exitFailed}
	}
	return nil
}
