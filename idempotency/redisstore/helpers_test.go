package redisstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/receipt"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

type mini struct {
	mr     *miniredis.Miniredis
	client rueidis.Client
	store  *Store
}

func newMini(t testing.TB, opts Options) *mini {
	t.Helper()
	mr := miniredis.RunT(t)
	mr.SetTime(t0)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	opts.SkipEvictionCheck = true // miniredis has no CONFIG and never evicts
	st, err := New(context.Background(), client, opts)
	if err != nil {
		t.Fatal(err)
	}
	return &mini{mr: mr, client: client, store: st}
}

// snapshot renders every key with its fields, the unknown index's entries
// and scores included, for "changes nothing" checks.
func (m *mini) snapshot(t testing.TB) string {
	t.Helper()
	var b strings.Builder
	keys := m.mr.Keys()
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString(k)
		b.WriteString(" ")
		switch m.mr.Type(k) {
		case "zset":
			ms, _ := m.mr.ZMembers(k)
			for _, mem := range ms {
				sc, _ := m.mr.ZScore(k, mem)
				fmt.Fprintf(&b, "%s=%v;", mem, sc)
			}
			b.WriteString("\n")
			continue
		}
		if m.mr.Type(k) == "hash" {
			fs, _ := m.mr.HKeys(k)
			sort.Strings(fs)
			for _, f := range fs {
				b.WriteString(f + "=" + m.mr.HGet(k, f) + ";")
			}
		} else {
			v, _ := m.mr.Get(k)
			b.WriteString(v)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

var testScope = idempotency.Scope{Workspace: "ws_acme", Connection: "conn_stripe", Tool: "stripe.create_charge"}

func claimReq(k idempotency.Key) idempotency.ClaimRequest {
	return idempotency.ClaimRequest{
		Scope:       testScope,
		Key:         k,
		KeySource:   idempotency.KeySupplied,
		RequestHash: hashOf("args"),
		Binding:     effectspec.BindingHeader,
		Route: receipt.RouteRecord{Connection: "conn_stripe", Provider: "stripe", Tool: "stripe.create_charge",
			Method: "POST", Host: "api.stripe.com", Path: "/v1/charges", Fingerprint: hashOf("route")},
	}
}

func (m *mini) recordKey(t testing.TB, k idempotency.Key) string {
	t.Helper()
	rk, err := testScope.StorageKey(m.store.prefix, k)
	if err != nil {
		t.Fatal(err)
	}
	return rk
}

func mustClaim(t testing.TB, s idempotency.Store, req idempotency.ClaimRequest, want idempotency.Status) idempotency.ClaimResult {
	t.Helper()
	res, err := s.Claim(context.Background(), req)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	if res.Status != want {
		t.Fatalf("claim: status %q, want %q", res.Status, want)
	}
	return res
}

func mustFinalize(t testing.TB, s idempotency.Store, k idempotency.Key, token int, outcome effectspec.Outcome, res *idempotency.StoredResult) idempotency.Record {
	t.Helper()
	rec, err := s.Finalize(context.Background(), idempotency.FinalizeRequest{Scope: testScope, Key: k, Token: token, Outcome: outcome, Result: res})
	if err != nil {
		t.Fatalf("finalize: %v", err)
	}
	return rec
}
