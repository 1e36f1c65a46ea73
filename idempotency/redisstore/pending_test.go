package redisstore_test

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
)

// TestPendingApprovals: a held call is listed from the pending approvals
// index with its ticket, once however often it is claimed again; a re-held
// unknown call is listed with its state; paging returns each once; a
// decision (approve or deny) removes the entry in its script, and an entry
// whose record is gone is dropped by the listing. On miniredis, a real Redis
// and a 3-master Cluster (the entries spread over the masters' slots).
func TestPendingApprovals(t *testing.T) {
	eachBackend(t, redisstore.Options{Prefix: "pend:", Lease: time.Second}, func(t *testing.T, b backend) {
		ctx := context.Background()
		st := b.store
		list := func(limit int) []idempotency.PendingApproval {
			t.Helper()
			var all []idempotency.PendingApproval
			seen := map[string]bool{}
			cursor := ""
			for pages := 0; ; pages++ {
				p, err := st.ListPending(ctx, idempotency.ListRequest{Workspace: "ws_acme", Cursor: cursor, Limit: limit})
				if err != nil {
					t.Fatalf("list: %v", err)
				}
				if len(p.Approvals) > limit || pages > 20 {
					t.Fatalf("page of %d (limit %d), page %d", len(p.Approvals), limit, pages)
				}
				for _, a := range p.Approvals {
					if seen[a.Ticket] {
						t.Fatalf("%s listed twice", a.Ticket)
					}
					seen[a.Ticket] = true
				}
				all = append(all, p.Approvals...)
				if cursor = p.Cursor; cursor == "" {
					return all
				}
			}
		}
		tickets := func(as []idempotency.PendingApproval) []string {
			var out []string
			for _, a := range as {
				out = append(out, a.Ticket+"/"+string(a.State))
			}
			sort.Strings(out)
			return out
		}
		hold := func(k idempotency.Key) string {
			t.Helper()
			req := opClaim(k)
			req.ApprovalRequired = true
			res, err := st.Claim(ctx, req)
			if err != nil || res.Status != idempotency.StatusHeld || !idempotency.ValidTicketID(res.Ticket) {
				t.Fatalf("hold: %+v %v", res, err)
			}
			return res.Ticket
		}
		var held []string
		keys := map[string]idempotency.Key{}
		for i := 0; i < 5; i++ {
			k := idempotency.NewKey()
			tk := hold(k)
			if again := hold(k); again != tk {
				t.Fatalf("held again with %s, want %s", again, tk)
			}
			held = append(held, tk+"/held")
			keys[tk] = k
		}
		sort.Strings(held)
		if got := tickets(list(2)); strings.Join(got, ",") != strings.Join(held, ",") {
			t.Fatalf("listed %v, want %v", got, held)
		}
		for _, a := range list(100) {
			if a.Key != keys[a.Ticket] || a.Scope.Tool != "stripe.create_charge" || a.Scope.Workspace != "ws_acme" || a.HeldAt.IsZero() {
				t.Fatalf("listed %+v", a)
			}
		}

		// A re-held call: unknown, then claimed again for a tool that now
		// requires approval.
		k := idempotency.NewKey()
		res, err := st.Claim(ctx, opClaim(k))
		if err != nil || res.Status != idempotency.StatusClaimed {
			t.Fatalf("claim: %+v %v", res, err)
		}
		if _, err := st.Finalize(ctx, idempotency.FinalizeRequest{Scope: opClaim(k).Scope, Key: k, Token: res.Token,
			Outcome: effectspec.Unknown, Incarnation: res.Incarnation}); err != nil {
			t.Fatalf("finalize unknown: %v", err)
		}
		rehold := hold(k)
		if got := tickets(list(100)); len(got) != 6 || !strings.Contains(strings.Join(got, ","), rehold+"/unknown") {
			t.Fatalf("after a re-hold: %v", got)
		}

		// Decisions remove their entries.
		first := strings.TrimSuffix(held[0], "/held")
		second := strings.TrimSuffix(held[1], "/held")
		for _, d := range []idempotency.DecideRequest{{Ticket: first, Approve: true}, {Ticket: second}, {Ticket: rehold, Approve: true}} {
			if _, err := st.Decide(ctx, d); err != nil {
				t.Fatalf("decide %+v: %v", d, err)
			}
		}
		if got := tickets(list(100)); strings.Join(got, ",") != strings.Join(held[2:], ",") {
			t.Fatalf("after the decisions: %v, want %v", got, held[2:])
		}

		// A record that is gone is not listed (its entry is dropped).
		gone := strings.TrimSuffix(held[2], "/held")
		rk, err := opClaim(keys[gone]).Scope.StorageKey("pend:", keys[gone])
		if err != nil {
			t.Fatal(err)
		}
		if err := b.client.Do(ctx, b.client.B().Del().Key(rk).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			if got := tickets(list(100)); strings.Join(got, ",") != strings.Join(held[3:], ",") {
				t.Fatalf("after a record vanished: %v, want %v", got, held[3:])
			}
		}
		if b.cluster == nil {
			n := 0
			keys, err := b.client.Do(ctx, b.client.B().Keys().Pattern("pend:apv:*").Build()).AsStrSlice()
			if err != nil {
				t.Fatal(err)
			}
			for _, key := range keys {
				c, _ := b.client.Do(ctx, b.client.B().Zcard().Key(key).Build()).AsInt64()
				n += int(c)
			}
			if n != 2 {
				t.Errorf("%d entries left in the pending buckets, want 2", n)
			}
		}
		if _, err := st.ListPending(ctx, idempotency.ListRequest{Workspace: "ws acme"}); err == nil {
			t.Error("a bad workspace was listed")
		}
	})
}
