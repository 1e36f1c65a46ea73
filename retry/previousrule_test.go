package retry_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/retry"
)

// pinUnderPreviousRule makes the record that a release before printed doubles
// (docs/DESIGN.md, "Request hash and dispatch fingerprint") made for c: claimed
// under hash and, unless outcome is zero, finalized with it. It returns the
// record's vendor key.
func pinUnderPreviousRule(t *testing.T, st idempotency.Store, c retry.Call, hash string, outcome effectspec.Outcome, result *idempotency.StoredResult) idempotency.Key {
	t.Helper()
	ctx := context.Background()
	c.Route.Binding = c.Spec.Idempotency.Kind
	claim, err := st.Claim(ctx, idempotency.ClaimRequest{Scope: c.Scope, Key: c.Key, KeySource: c.KeySource, RequestHash: hash,
		Binding: c.Route.Binding, Route: c.Route.Record(), Timeout: c.Spec.AttemptTimeout(),
		OpID: idempotency.NewOpID()})
	if err != nil || claim.Status != idempotency.StatusClaimed {
		t.Fatalf("claim: %v, %v", claim.Status, err)
	}
	if _, err := st.Finalize(ctx, idempotency.FinalizeRequest{Scope: c.Scope, Key: c.Key, Token: claim.Token, Outcome: outcome,
		Result: result, OpID: idempotency.NewOpID()}); err != nil {
		t.Fatalf("finalize: %v", err)
	}
	return claim.VendorKey
}

// previousHash is the request hash of canonical, a canonical form under the
// rule before printed doubles, which kept 0.10000000000000001 exactly.
func previousHash(canonical string) string {
	sum := sha256.Sum256([]byte(canonical))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// A record pinned under the previous number rule (0.10000000000000001 kept
// exactly; now it is the double 0.1) matches its own retry, whose
// arguments hash otherwise now: the final record replays, and its receipt
// shows the hash the record pinned. A request that differs is still
// request_mismatch.
func TestRecordPinnedUnderPreviousNumberRuleReplays(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		st := b.open(t, 5*time.Second)
		o := orch(st, 5*time.Second)
		v := newVendor(t, status(201))
		c := call(v.URL, spec(effectspec.BindingHeader), idempotency.NewKey(), &retry.Executor{})
		c.Arguments = []byte(`{"amount": 0.10000000000000001, "currency": "eur"}`)
		pinned := previousHash(`{"amount":1.0000000000000001e-1,"currency":"eur"}`)
		if now, _ := idempotency.RequestHash(c.Arguments); now == pinned {
			t.Fatalf("the arguments hash as under the previous rule: %s", now)
		}
		pinUnderPreviousRule(t, st, c, pinned, effectspec.Accepted,
			&idempotency.StoredResult{Status: 201, Body: []byte(`{"charge":"ch_1"}`)})

		out, err := o.Do(context.Background(), c)
		expect(t, out, err, effectspec.Accepted, 1, v.seen.Load())
		if !out.Receipt.Replayed || v.seen.Load() != 0 || out.Result == nil || string(out.Result.Body) != `{"charge":"ch_1"}` {
			t.Fatalf("replayed=%v seen=%d result=%+v", out.Receipt.Replayed, v.seen.Load(), out.Result)
		}
		if out.Receipt.RequestHash != pinned {
			t.Fatalf("receipt request_hash %s, want the pinned %s", out.Receipt.RequestHash, pinned)
		}
		for _, args := range []string{
			`{"amount": 0.20000000000000001, "currency": "eur"}`, // another printed double
			`{"amount": 0.10000000000000001, "currency": "usd"}`,
			`{"amount": 0.1000000000000000055511151231257827, "currency": "eur"}`, // another exact value
			// The same double at its shortest: the previous rule told it
			// apart, so its record does not match it either.
			`{"amount": 0.1, "currency": "eur"}`,
		} {
			d := c
			d.Arguments = []byte(args)
			if _, err := o.Do(context.Background(), d); !errors.Is(err, idempotency.ErrRequestMismatch) {
				t.Fatalf("Do(%s) error = %v, want request_mismatch", args, err)
			}
		}
		if v.seen.Load() != 0 {
			t.Fatalf("vendor saw %d requests", v.seen.Load())
		}
	})
}

// An unknown record pinned under the previous rule is redispatched by its
// retry (header binding) with the record's vendor key, and stays pinned
// under its hash: the next retry replays it.
func TestUnknownRecordPinnedUnderPreviousNumberRuleRedispatches(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		st := b.open(t, 5*time.Second)
		o := orch(st, 5*time.Second)
		v := newVendor(t, status(201))
		c := call(v.URL, spec(effectspec.BindingHeader), idempotency.NewKey(), &retry.Executor{})
		c.Arguments = []byte(`{"currency": "eur", "rate": [47839.395003393292]}`)
		pinned := previousHash(`{"currency":"eur","rate":[4.7839395003393292e+4]}`)
		vendorKey := pinUnderPreviousRule(t, st, c, pinned, effectspec.Unknown, nil)

		out, err := o.Do(context.Background(), c)
		expect(t, out, err, effectspec.Accepted, 2, v.seen.Load())
		if out.Receipt.Replayed || v.seen.Load() != 1 || out.Receipt.RequestHash != pinned {
			t.Fatalf("replayed=%v seen=%d request_hash=%s, want %s", out.Receipt.Replayed, v.seen.Load(), out.Receipt.RequestHash, pinned)
		}
		v.mu.Lock()
		sent := v.keys[0]
		v.mu.Unlock()
		if out.Receipt.VendorKey != vendorKey.String() || sent != vendorKey.String() {
			t.Fatalf("vendor key %s on the receipt, %s sent; the record's is %s", out.Receipt.VendorKey, sent, vendorKey)
		}
		again, err := o.Do(context.Background(), c)
		expect(t, again, err, effectspec.Accepted, 2, v.seen.Load())
		if !again.Receipt.Replayed || v.seen.Load() != 1 || again.Receipt.RequestHash != pinned {
			t.Fatalf("replayed=%v seen=%d request_hash=%s", again.Receipt.Replayed, v.seen.Load(), again.Receipt.RequestHash)
		}
	})
}

// A record pinned when an integer id whose exact notation is a printed
// double (72057594037927936, 2^56 at 17 digits) was canonicalized in that
// exponent notation matches its retry, whose arguments now canonicalize
// the id in plain digits; the neighbouring id of the same double does not.
func TestRecordPinnedWithIntegerIDInExponentNotationReplays(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		st := b.open(t, 5*time.Second)
		o := orch(st, 5*time.Second)
		v := newVendor(t, status(201))
		c := call(v.URL, spec(effectspec.BindingHeader), idempotency.NewKey(), &retry.Executor{})
		c.Arguments = []byte(`{"order": 72057594037927936}`)
		pinned := previousHash(`{"order":7.2057594037927936e+16}`)
		if now, _ := idempotency.RequestHash(c.Arguments); now == pinned || now != previousHash(`{"order":72057594037927936}`) {
			t.Fatalf("the arguments hash %s; the previous rule's is %s", now, pinned)
		}
		pinUnderPreviousRule(t, st, c, pinned, effectspec.Accepted,
			&idempotency.StoredResult{Status: 201, Body: []byte(`{"charge":"ch_2"}`)})

		out, err := o.Do(context.Background(), c)
		expect(t, out, err, effectspec.Accepted, 1, v.seen.Load())
		if !out.Receipt.Replayed || v.seen.Load() != 0 || out.Receipt.RequestHash != pinned {
			t.Fatalf("replayed=%v seen=%d request_hash=%s, want %s", out.Receipt.Replayed, v.seen.Load(), out.Receipt.RequestHash, pinned)
		}
		d := c
		d.Arguments = []byte(`{"order": 72057594037927940}`)
		if _, err := o.Do(context.Background(), d); !errors.Is(err, idempotency.ErrRequestMismatch) {
			t.Fatalf("Do(72057594037927940) error = %v, want request_mismatch", err)
		}
		if v.seen.Load() != 0 {
			t.Fatalf("vendor saw %d requests", v.seen.Load())
		}
	})
}
