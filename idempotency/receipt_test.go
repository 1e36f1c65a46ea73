package idempotency_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/receipt"
)

// TestRecordReceipt: a record makes its receipt alone: the scope's tool and
// workspace, the pinned route with its fingerprint, the propagation of the
// record's binding, the vendor key only for a binding that sends one, the
// state as the outcome, and the resolution (a copy).
func TestRecordReceipt(t *testing.T) {
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	scope := idempotency.Scope{Workspace: "ws_acme", Connection: "conn_x", Tool: "x.send"}
	route := receipt.RouteRecord{Connection: "conn_x", Provider: "x", Tool: "x.send", Method: "POST", Host: "x.test", Path: "/v1", Fingerprint: "sha256:" + strings.Repeat("b", 64)}
	key, vkey := idempotency.NewKey(), idempotency.NewKey()
	for _, c := range []struct {
		binding     effectspec.BindingKind
		propagation effectspec.Propagation
		vendorKey   string
	}{
		{effectspec.BindingHeader, effectspec.PropagationHeader, vkey.String()},
		{effectspec.BindingBodyPointer, effectspec.PropagationBodyPointer, vkey.String()},
		{effectspec.BindingInProcessKeyed, effectspec.PropagationHandler, vkey.String()},
		{effectspec.BindingMeta, effectspec.PropagationMeta, vkey.String()},
		{effectspec.BindingUnsupported, effectspec.PropagationNone, ""},
		{effectspec.BindingInProcess, effectspec.PropagationNone, ""},
	} {
		rec := idempotency.Record{State: effectspec.Accepted, Key: key, KeySource: idempotency.KeyMinted, RequestHash: "sha256:" + strings.Repeat("a", 64),
			Binding: c.binding, Route: route, VendorKey: vkey, AttemptCount: 2, SentAttempts: 2, CreatedAt: at, FinalizedAt: at.Add(time.Second),
			Result: &idempotency.StoredResult{Status: 201}}
		rc := rec.Receipt(scope, true)
		want := receipt.Receipt{IdempotencyKey: key.String(), KeySource: "minted", RequestHash: rec.RequestHash, Tool: "x.send", Workspace: "ws_acme",
			Route: route, Binding: string(c.binding), Propagation: string(c.propagation), VendorKey: c.vendorKey, AttemptCount: 2,
			Outcome: effectspec.Accepted, Status: 201, Replayed: true, SafeNewKey: receipt.Safe(false), CreatedAt: at, FinalizedAt: at.Add(time.Second)}
		got, _ := json.Marshal(rc)
		exp, _ := json.Marshal(want)
		if string(got) != string(exp) {
			t.Errorf("%s: receipt\n%s\nwant\n%s", c.binding, got, exp)
		}
	}
	// A record made before vendor keys existed sent the client's key.
	old := idempotency.Record{State: effectspec.Unknown, Key: key, Binding: effectspec.BindingHeader, AttemptCount: 1}
	if rc := old.Receipt(scope, false); rc.VendorKey != key.String() || rc.Outcome != effectspec.Unknown || rc.Status != 0 || rc.Resolution != nil {
		t.Errorf("receipt of a record without a vendor key: %+v", rc)
	}
	res := &receipt.Resolution{Outcome: effectspec.DefinitelyRejected, By: "ops", At: at, Note: "no charge"}
	settled := idempotency.Record{State: effectspec.DefinitelyRejected, Key: key, Binding: effectspec.BindingUnsupported, AttemptCount: 1, Resolution: res}
	rc := settled.Receipt(scope, false)
	if rc.Resolution == nil || *rc.Resolution != *res || rc.Resolution == res {
		t.Fatalf("resolution %+v, want a copy of %+v", rc.Resolution, res)
	}
}

// TestRecordSafeNewKey: only a definitely_rejected record none of whose
// earlier attempts may have left, and a denied one, make a new key safe.
func TestRecordSafeNewKey(t *testing.T) {
	for _, c := range []struct {
		state          effectspec.Outcome
		attempts, sent int
		want           bool
	}{
		{effectspec.DefinitelyRejected, 1, 1, true},
		{effectspec.DefinitelyRejected, 2, 1, true}, // the first attempt never left
		{effectspec.DefinitelyRejected, 2, 2, false},
		{effectspec.Denied, 0, 0, true},
		{effectspec.Accepted, 1, 1, false},
		{effectspec.Unknown, 1, 0, false},
		{effectspec.InProgress, 1, 1, false},
		{effectspec.Held, 0, 0, false},
	} {
		rec := idempotency.Record{State: c.state, AttemptCount: c.attempts, SentAttempts: c.sent}
		if got := rec.Receipt(idempotency.Scope{}, false).SafeNewKey; got == nil || *got != c.want {
			t.Errorf("%s: receipt safe_new_key %v, want %v", c.state, got, c.want)
		}
	}
}
