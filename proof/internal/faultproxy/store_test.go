package faultproxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/internal/redistest"
	"github.com/obol-gateway/obol/receipt"
)

// TestScriptKindNamesTheStoresCommands runs every script of a real Store
// through the proxy and checks that ScriptKind names each command the
// store sends, with its record key: the reliability suite aims its faults
// by ScriptKind, and a script it cannot name would silently stop them.
func TestScriptKindNamesTheStoresCommands(t *testing.T) {
	srv := redistest.Start(t)
	p := start(t, srv.Addr())
	var mu sync.Mutex
	seen := map[string]string{} // kind: a key it ran on
	var unnamed [][]string
	p.SetRule(func(cmd []string) Action {
		kind, key := ScriptKind(cmd)
		if kind == "script?" {
			mu.Lock()
			unnamed = append(unnamed, cmd)
			mu.Unlock()
		} else if len(cmd) > 0 && (cmd[0] == "EVALSHA" || cmd[0] == "EVAL" || cmd[0] == "EVALSHA_RO" || cmd[0] == "EVAL_RO") {
			mu.Lock()
			seen[kind] = key
			mu.Unlock()
		}
		return Pass
	})
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{p.Addr()}, DisableCache: true,
		Dialer: net.Dialer{Timeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := redisstore.New(ctx, c, redisstore.Options{AccountBytes: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	digest := func(v string) string {
		sum := sha256.Sum256([]byte(v))
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	scope := idempotency.Scope{Workspace: "ws_kind", Connection: "conn_kind", Tool: "kind.create"}
	req := func(k idempotency.Key) idempotency.ClaimRequest {
		return idempotency.ClaimRequest{Scope: scope, Key: k, KeySource: idempotency.KeySupplied, RequestHash: digest("args"),
			Binding: effectspec.BindingHeader, Route: receipt.RouteRecord{Connection: "conn_kind", Provider: "vendor", Tool: "kind.create", Method: "POST", Host: "vendor.test", Path: "/v1", Fingerprint: digest("route")}}
	}
	must := func(step string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}

	// Approval: held, decided, then claimed with the ticket.
	k := idempotency.NewKey()
	r := req(k)
	r.ApprovalRequired = true
	held, err := s.Claim(ctx, r)
	must("claim", err)
	if held.Status != idempotency.StatusHeld {
		t.Fatalf("claim: %s, want held", held.Status)
	}
	_, err = s.Decide(ctx, idempotency.DecideRequest{Ticket: held.Ticket, Approve: true})
	must("decide", err)
	r.Ticket = held.Ticket
	res, err := s.Claim(ctx, r)
	must("claim", err)
	if res.Status != idempotency.StatusClaimed {
		t.Fatalf("claim with the ticket: %s, want claimed", res.Status)
	}
	_, err = s.Renew(ctx, idempotency.RenewRequest{Scope: scope, Key: k, Token: res.Token, Incarnation: res.Incarnation})
	must("renew", err)
	// The first attempt proved never sent, so the settle below need not
	// wait for its deadline (DESIGN 6: settle waits for every attempt
	// that may still run).
	rv, err := s.Reserve(ctx, idempotency.ReserveRequest{Scope: scope, Key: k, Token: res.Token, Incarnation: res.Incarnation,
		PreviousNeverSent: true})
	must("reserve", err)
	_, err = s.Finalize(ctx, idempotency.FinalizeRequest{Scope: scope, Key: k, Token: rv.Token, Outcome: effectspec.Unknown, Incarnation: res.Incarnation})
	must("finalize", err)
	_, err = s.ListUnknown(ctx, idempotency.ListRequest{Workspace: scope.Workspace})
	must("list unknown", err)
	rec, err := s.Lookup(ctx, scope, k)
	must("lookup", err)
	_, err = s.Settle(ctx, idempotency.SettleRequest{Scope: scope, Key: k, Attempts: rec.AttemptCount, Outcome: effectspec.Accepted, By: "op", Note: "checked"})
	must("settle", err)

	// A give-back of a claim nobody sent.
	k2 := idempotency.NewKey()
	r2 := req(k2)
	r2.OpID = "claim-op"
	res2, err := s.Claim(ctx, r2)
	must("claim", err)
	must("give back", s.GiveBack(ctx, idempotency.GiveBackRequest{Scope: scope, Key: k2, Token: res2.Token, ClaimOpID: "claim-op", Incarnation: res2.Incarnation}))
	// The listing drops (index) the entry of a record that is gone.
	rk, err := scope.StorageKey(idempotency.DefaultPrefix, k2)
	must("storage key", err)
	_, err = srv.Do("DEL", rk)
	must("DEL", err)
	_, err = s.ListUnknown(ctx, idempotency.ListRequest{Workspace: scope.Workspace})
	must("list unknown", err)

	// The quota scripts: a take of tokens, a read of the stored bytes,
	// and the flush of the counts (at Close).
	_, _, err = s.TakeTokens(ctx, scope.Workspace, 10, 10, 1)
	must("take tokens", err)
	_, err = s.StoredBytes(ctx, scope.Workspace)
	must("stored bytes", err)
	s.Close()

	mu.Lock()
	defer mu.Unlock()
	for _, cmd := range unnamed {
		t.Errorf("ScriptKind cannot name a command the store sent: %.120q", cmd)
	}
	var want []string
	for _, sc := range redisstore.Scripts() {
		want = append(want, sc.Name)
	}
	for _, kind := range want {
		key, ok := seen[kind]
		if !ok {
			t.Errorf("no %s command seen (seen: %v)", kind, seen)
			continue
		}
		if kind != "index" && key == "" {
			t.Errorf("%s: no record key", kind)
		}
	}
	for kind := range seen {
		if !slices.Contains(want, kind) {
			t.Errorf("ScriptKind named %q, not a script of redisstore.Scripts", kind)
		}
	}
}
