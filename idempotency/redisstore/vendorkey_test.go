package redisstore

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

func TestDeploymentIsSharedPerPrefix(t *testing.T) {
	m := newMini(t, Options{})
	dep := m.store.Deployment()
	if ValidateDeploymentID(dep) != nil || len(dep) != 32 {
		t.Fatalf("deployment %q: want 32 lowercase hex digits", dep)
	}
	if got, _ := m.mr.Get("obol:meta:deployment"); got != dep {
		t.Fatalf("stored deployment %q, want %q", got, dep)
	}
	again, err := New(ctx, m.client, Options{SkipEvictionCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	if again.Deployment() != dep {
		t.Fatalf("second store: deployment %q, want the first one's %q", again.Deployment(), dep)
	}
	other, err := New(ctx, m.client, Options{Prefix: "other:", SkipEvictionCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	if other.Deployment() == dep {
		t.Fatal("another prefix shares the deployment id")
	}
}

func TestCorruptDeploymentRefusesToStart(t *testing.T) {
	m := newMini(t, Options{})
	m.mr.Set("obol:meta:deployment", "not-hex")
	_, err := New(ctx, m.client, Options{SkipEvictionCheck: true})
	if !errors.Is(err, errCorruptRecord) {
		t.Fatalf("New over a corrupt deployment id: %v, want errCorruptRecord", err)
	}
	if strings.Contains(err.Error(), "not-hex") {
		t.Fatalf("error quotes the stored value: %v", err)
	}
}

// TestVendorKeyIsTheSlots checks that the vendor key is made once with the
// record and comes back unchanged on every claim that dispatches: a re-sent
// claim, a redispatch of an unknown slot, and an approved resume.
func TestVendorKeyIsTheSlots(t *testing.T) {
	m := newMini(t, Options{Lease: time.Second})
	k := idempotency.NewKey()
	want := idempotency.VendorKey(m.store.Deployment(), testScope, k, hashOf("args"))
	req := claimReq(k)
	req.OpID = "op1"
	first := mustClaim(t, m.store, req, idempotency.StatusClaimed)
	resent := mustClaim(t, m.store, req, idempotency.StatusClaimed)
	if first.VendorKey != want || resent.VendorKey != want || !resent.AlreadyApplied {
		t.Fatalf("vendor keys %v, %v (applied %v), want %v", first.VendorKey, resent.VendorKey, resent.AlreadyApplied, want)
	}
	mustFinalize(t, m.store, k, 1, effectspec.Unknown, nil)
	again := mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed)
	if again.Token != 2 || again.VendorKey != want {
		t.Fatalf("redispatch: token %d vendor key %v, want 2 and %v", again.Token, again.VendorKey, want)
	}

	// Approval: the key is made when the call is held and sent on resume.
	k2 := idempotency.NewKey()
	held := claimReq(k2)
	held.ApprovalRequired = true
	h := mustClaim(t, m.store, held, idempotency.StatusHeld)
	if _, err := m.store.Decide(ctx, idempotency.DecideRequest{Ticket: h.Ticket, Approve: true}); err != nil {
		t.Fatal(err)
	}
	resume := claimReq(k2)
	resume.Ticket = h.Ticket
	r := mustClaim(t, m.store, resume, idempotency.StatusClaimed)
	if want2 := idempotency.VendorKey(m.store.Deployment(), testScope, k2, hashOf("args")); r.VendorKey != want2 {
		t.Fatalf("resume vendor key %v, want %v", r.VendorKey, want2)
	}
}

func TestUnsupportedBindingHasNoVendorKey(t *testing.T) {
	m := newMini(t, Options{})
	k := idempotency.NewKey()
	req := claimReq(k)
	req.Binding = effectspec.BindingUnsupported
	res := mustClaim(t, m.store, req, idempotency.StatusClaimed)
	if !res.VendorKey.IsZero() {
		t.Fatalf("unsupported binding got vendor key %v", res.VendorKey)
	}
	if recordFields(t, m.mr, m.recordKey(t, k))["k"] != "" {
		t.Fatal("unsupported binding stored a vendor key")
	}
}

// TestRecordBeforeVendorKeys writes a record as the store wrote it before
// vendor keys (no k field, digests as hex): its request hash and route still
// compare, it replays, and a redispatch keeps sending the client's key.
func TestRecordBeforeVendorKeys(t *testing.T) {
	m := newMini(t, Options{})
	legacy := func(k idempotency.Key, state string) string {
		rk := m.recordKey(t, k)
		created := t0.Add(-time.Minute).UnixMilli()
		m.mr.HSet(rk, "m", state+"sh", "w", "1", "q", hashOf("args")[7:], "f", hashOf("route")[7:],
			"c", "conn_stripe", "p", "stripe", "n", "1", "C", strconv.FormatInt(created, 10), "U", strconv.FormatInt(created, 10), "o", "xxxxxxxx")
		m.mr.SetTTL(rk, time.Hour)
		return rk
	}
	unknown := idempotency.NewKey()
	legacy(unknown, "u")
	mismatch := claimReq(unknown)
	mismatch.RequestHash = hashOf("other args")
	mustClaim(t, m.store, mismatch, idempotency.StatusRequestMismatch)
	conflict := claimReq(unknown)
	conflict.Route.Fingerprint = hashOf("other route")
	mustClaim(t, m.store, conflict, idempotency.StatusDestinationConflict)
	res := mustClaim(t, m.store, claimReq(unknown), idempotency.StatusClaimed)
	if res.Token != 2 || !res.VendorKey.IsZero() {
		t.Fatalf("legacy redispatch: token %d vendor key %v, want 2 and none (send the client's key)", res.Token, res.VendorKey)
	}

	final := idempotency.NewKey()
	rk := legacy(final, "a")
	m.mr.HSet(rk, "x", "201")
	rep := mustClaim(t, m.store, claimReq(final), idempotency.StatusReplay)
	if rep.Record.RequestHash != hashOf("args") || rep.Record.Route.Fingerprint != hashOf("route") || !rep.Record.VendorKey.IsZero() {
		t.Fatalf("legacy replay record %+v", rep.Record)
	}
}
