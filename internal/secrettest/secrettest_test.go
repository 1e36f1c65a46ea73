package secrettest_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/idempotency/redisstore/embedded"
	"github.com/obol-gateway/obol/internal/secrettest"
	"github.com/obol-gateway/obol/receipt"
)

func TestLeak(t *testing.T) {
	const s = "sk_9f/8e<7d>&c"
	for _, b := range []string{
		"x" + s + "y",
		`{"a":"sk_9f/8e\u003c7d\u003e\u0026c"}`,
		`{"a":"sk_9f\/8e<7d>&c"}`,
		`"sk_9f/8e\u003C7d\u003E\u0026c"`,
		"Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+s)),
		base64.RawURLEncoding.EncodeToString([]byte("ab" + s + "cd")),
	} {
		if secrettest.Leak([]byte(b), "other_secret", s) == "" {
			t.Errorf("no leak seen in %s", b)
		}
	}
	for _, b := range []string{"", "sk_9f/8e", `{"a":"[redacted]"}`, base64.StdEncoding.EncodeToString([]byte("sk_9f/8e<7d"))} {
		if l := secrettest.Leak([]byte(b), s); l != "" {
			t.Errorf("%s seen in %s", l, b)
		}
	}
}

// A stored body is compressed: DumpRedis must still show a secret in it, or
// every scrub test that reads Redis would pass on a leak.
func TestDumpRedisSeesIntoCompressedBodies(t *testing.T) {
	mr := miniredis.RunT(t)
	ctx := context.Background()
	store, closeStore, err := embedded.On(ctx, mr, redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeStore)
	const secret = "sk_live_0123456789abcdef"
	body := []byte(`{"echo":"` + strings.Repeat("header Authorization: Bearer "+secret+"; ", 20) + `"}`)
	scope := idempotency.Scope{Workspace: "ws_acme", Connection: "conn_stripe", Tool: "stripe.create_charge"}
	key := idempotency.NewKey()
	hash, err := idempotency.RequestHash(nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := store.Claim(ctx, idempotency.ClaimRequest{Scope: scope, Key: key, KeySource: idempotency.KeySupplied,
		RequestHash: hash, Binding: effectspec.BindingHeader,
		Route: receipt.RouteRecord{Fingerprint: idempotency.Route{Connection: "conn_stripe", Binding: effectspec.BindingHeader}.Fingerprint()}, OpID: idempotency.NewOpID()})
	if err != nil || c.Status != idempotency.StatusClaimed {
		t.Fatalf("claim: %v %v", c.Status, err)
	}
	if _, err := store.Finalize(ctx, idempotency.FinalizeRequest{Scope: scope, Key: key, Token: c.Token,
		Outcome: effectspec.Accepted, Result: &idempotency.StoredResult{Status: 200, Body: body}, OpID: idempotency.NewOpID()}); err != nil {
		t.Fatal(err)
	}
	for _, k := range mr.Keys() {
		if v, err := mr.Get(k); err == nil && strings.Contains(v, secret) {
			t.Fatalf("the stored body is not compressed (key %s): this test no longer proves anything", k)
		}
	}
	if secrettest.Leak(secrettest.DumpRedis(t, mr), secret) == "" {
		t.Fatal("DumpRedis does not show the secret in a compressed body")
	}
}
