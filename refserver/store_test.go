package main

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/receipt"
)

// The embedded store ages TTLs with the wall clock, so retention is honoured
// there as on Redis.
func TestEmbeddedStoreHonoursRetention(t *testing.T) {
	ctx := context.Background()
	opts := redisstore.Options{Prefix: "obol:", Retention: 300 * time.Millisecond, UnknownRetention: 300 * time.Millisecond, Lease: 100 * time.Millisecond}
	st, release, err := openStore(ctx, opts, "", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	scope := idempotency.Scope{Workspace: "ws", Connection: "c", Tool: "t"}
	req := idempotency.ClaimRequest{Scope: scope, Key: idempotency.NewKey(), KeySource: idempotency.KeyMinted,
		RequestHash: "sha256:" + fill('a'), Binding: effectspec.BindingHeader, Route: receipt.RouteRecord{Fingerprint: "sha256:" + fill('b')},
		Timeout: 100 * time.Millisecond} // within the retention: a longer attempt is refused
	if r, err := st.Claim(ctx, req); err != nil || r.Status != idempotency.StatusClaimed {
		t.Fatalf("claim: %+v %v", r, err)
	}
	if _, err := st.Lookup(ctx, scope, req.Key); err != nil {
		t.Fatalf("fresh record: %v", err)
	}
	time.Sleep(500 * time.Millisecond)
	if _, err := st.Lookup(ctx, scope, req.Key); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("after retention: %v, want ErrNotFound", err)
	}
}

func fill(c byte) string {
	b := make([]byte, 64)
	for i := range b {
		b[i] = c
	}
	return string(b)
}
