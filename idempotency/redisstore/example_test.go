package redisstore_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/receipt"
)

// A store on miniredis: the first claim of a key reserves attempt 1, a second
// claim while it runs is refused in_progress, and once the attempt is
// finalized every claim replays it.
func ExampleNew() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	// Client-side caching off: the store's reads must see the server's state.
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	ctx := context.Background()
	// miniredis has no CONFIG (and never evicts); against Redis, leave the
	// eviction check on.
	store, err := redisstore.New(ctx, client, redisstore.Options{SkipEvictionCheck: true})
	if err != nil {
		panic(err)
	}

	scope := idempotency.Scope{Workspace: "ws_acme", Connection: "conn_stripe", Tool: "stripe.create_charge"}
	key, _ := idempotency.ParseKey("idt_5c1f0a9e2b7d4c3e8f6a1b2c3d4e5f60")
	hash, _ := idempotency.RequestHash([]byte(`{"amount":1200,"currency":"usd"}`))
	route := idempotency.Route{Connection: "conn_stripe", Provider: "stripe", Tool: scope.Tool,
		Method: "POST", Host: "api.stripe.com", Path: "/v1/charges", Binding: effectspec.BindingHeader}
	claim := idempotency.ClaimRequest{
		Scope: scope, Key: key, KeySource: idempotency.KeySupplied, RequestHash: hash,
		Binding: effectspec.BindingHeader, Route: receipt.RouteRecord{Connection: "conn_stripe", Provider: "stripe", Fingerprint: route.Fingerprint()},
	}

	first, err := store.Claim(ctx, claim)
	if err != nil {
		panic(err)
	}
	fmt.Println("first claim:", first.Status, "token", first.Token, "vendor key derived:", first.VendorKey != key)

	again, err := store.Claim(ctx, claim)
	if err != nil {
		panic(err)
	}
	fmt.Println("while in flight:", again.Status, errors.Is(again.Err(), idempotency.ErrInProgress))

	rec, err := store.Finalize(ctx, idempotency.FinalizeRequest{Scope: scope, Key: key, Token: first.Token,
		Outcome: effectspec.Accepted, Result: &idempotency.StoredResult{Status: 201, Body: []byte(`{"id":"ch_1"}`)}})
	if err != nil {
		panic(err)
	}
	fmt.Println("finalized:", rec.State, "attempts", rec.AttemptCount)

	replay, err := store.Claim(ctx, claim)
	if err != nil {
		panic(err)
	}
	fmt.Println("after:", replay.Status, replay.Record.Result.Status, string(replay.Record.Result.Body))
	// Output:
	// first claim: claimed token 1 vendor key derived: true
	// while in flight: in_progress true
	// finalized: accepted attempts 1
	// after: replay 201 {"id":"ch_1"}
}
