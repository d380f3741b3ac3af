package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/berthhq/berth/api/wire"
	"github.com/spf13/pflag"
)

func parkedGroupsFlags(fs *pflag.FlagSet, o *options) {
	fs.StringVar(&o.subscription, "subscription", "", "only subscription `SUB`")
	fs.StringVar(&o.state, "state", "", "count only `STATE`: retrying, waiting or resuming")
	fs.StringVar(&o.aggregateType, "aggregate-type", "", "count only aggregate type `TYPE`")
	fs.StringVar(&o.class, "class", "", "only groups whose class chain holds `CLASS`")
	fs.StringVar(&o.message, "message", "", "only groups whose masked message holds `TEXT` (any case)")
	fs.IntVar(&o.limit, "limit", 0, "list at most `N` groups (default 100)")
	fs.BoolVar(&o.all, "all", false, "list every group, page after page")
	fs.StringVar(&o.after, "after", "", "list from `CURSOR` on (the one a previous list printed)")
}

// groups reads one page of failure groups (GET /v1/parked/groups).
func (c *client) groups(ctx context.Context, q parkedQuery) ([]byte, error) {
	v := url.Values{}
	for k, s := range map[string]string{"subscription": q.Subscription, "state": q.State, "aggregateType": q.AggregateType,
		"class": q.Class, "message": q.Message, "after": q.After} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return c.get(ctx, apiPath("parked", "groups"), v)
}

// parkedGroups prints the failure groups, biggest first: one line a
// cause, however many records it parked.
func parkedGroups(x *invocation, _ []string) error {
	o := x.opts
	if err := checkListFlags(o); err != nil {
		return err
	}
	want := o.limit
	if want == 0 && !o.all {
		want = defaultListLimit
	}
	q := parkedQuery{Subscription: o.subscription, State: o.state, AggregateType: o.aggregateType, Class: o.class,
		Message: o.message, After: o.after, Limit: 1000}
	if want > 0 {
		q.Limit = min(want, 1000)
	}
	var all wire.ParkedGroupPage
	for {
		raw, err := x.client.groups(x.ctx, q)
		if err != nil {
			return err
		}
		var page wire.ParkedGroupPage
		if err := decode(raw, &page); err != nil {
			return err
		}
		all.Groups = append(all.Groups, page.Groups...)
		all.Next = page.Next
		if (want > 0 && len(all.Groups) >= want) || page.Next == "" || page.Next == q.After {
			break
		}
		q.After = page.Next
		if want > 0 {
			q.Limit = min(want-len(all.Groups), 1000)
		}
	}
	if x.global.json {
		if all.Groups == nil {
			all.Groups = []wire.ParkedGroup{}
		}
		raw, err := json.Marshal(all)
		if err != nil {
			return err
		}
		return x.printJSON(raw)
	}
	if len(all.Groups) == 0 {
		fmt.Fprintln(x.stdout, "no parked aggregates")
		return nil
	}
	t := x.table("GROUP", "SUBSCRIPTION", "COUNT", "CLASSES", "MODULE VERSIONS", "FIRST FAILURE", "LAST FAILURE", "MESSAGE")
	for _, g := range all.Groups {
		t.row(g.Group, g.Subscription, strconv.Itoa(g.Count), orDash(strings.Join(g.Classes, " < ")), moduleCounts(g.Modules),
			relative(g.FirstFailure, x.now), relative(g.LastFailure, x.now), g.Message)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if all.Next != "" {
		fmt.Fprintf(x.stderr, "more groups: berth parked groups --after %s (or --all for every one)\n", all.Next)
	}
	return nil
}

// moduleCounts is "v3 ×120, v4 ×2": the versions of a group's records.
func moduleCounts(m wire.ModuleCounts) string {
	vs := make([]string, 0, len(m))
	for v := range m {
		vs = append(vs, v)
	}
	sort.Strings(vs)
	for i, v := range vs {
		vs[i] = fmt.Sprintf("%s ×%d", v, m[v])
	}
	return orDash(strings.Join(vs, ", "))
}
