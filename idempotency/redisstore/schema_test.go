package redisstore

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/scriptargs"
)

// schemaOne writes a record as the store of schema 1 wrote it: a hash,
// digests as bytes, numbers as text, kept headers as "0".."9" or ":Name".
func schemaOne(t *testing.T, m *mini, k idempotency.Key, fields ...string) string {
	t.Helper()
	rk := m.recordKey(t, k)
	created := strconv.FormatInt(t0.Add(-time.Minute).UnixMilli(), 10)
	m.mr.HSet(rk, append([]string{"w", "1", "q", mustDigest(t, hashOf("args")), "f", mustDigest(t, hashOf("route")),
		"c", "conn_stripe", "p", "stripe", "C", created, "o", "xxxxxxxx"}, fields...)...)
	m.mr.SetTTL(rk, time.Hour)
	return rk
}

// TestSchemaOneRecords: records of the previous layout, still in Redis
// during a rolling upgrade, replay their exact result, answer in_progress
// while their lease lives, settle, and read as schema 1 until a script
// changes them, which writes them as schema 2 with their TTL.
func TestSchemaOneRecords(t *testing.T) {
	m := newMini(t, Options{})
	lease := strconv.FormatInt(t0.Add(time.Minute).UnixMilli(), 10)

	final := idempotency.NewKey()
	schemaOne(t, m, final, "m", "ash", "n", "1", "F", "250", "x", "201", "B", `{"id":"ch_1"}`,
		"0", "application/json", ":X-Vendor-Trace", "a:b")
	before := m.snapshot(t)
	rep := mustClaim(t, m.store, claimReq(final), idempotency.StatusReplay)
	r := rep.Record.Result
	if r == nil || r.Status != 201 || string(r.Body) != `{"id":"ch_1"}` || r.Header.Get("Content-Type") != "application/json" ||
		r.Header.Get("X-Vendor-Trace") != "a:b" || rep.Record.Route.Provider != "stripe" || rep.Record.AttemptCount != 1 {
		t.Fatalf("schema 1 replay: %+v, result %+v", rep.Record, r)
	}
	if rec, err := m.store.Lookup(ctx, testScope, final); err != nil || rec.SchemaVersion != legacySchema {
		t.Fatalf("lookup: schema %d, %v; want %d", rec.SchemaVersion, err, legacySchema)
	}
	if m.snapshot(t) != before {
		t.Fatal("a replay of a schema 1 record wrote")
	}

	live := idempotency.NewKey()
	schemaOne(t, m, live, "m", "fsh", "n", "1", "y", "1", "l", lease, "e", lease, "U", lease)
	mustClaim(t, m.store, claimReq(live), idempotency.StatusInProgress)

	unknown := idempotency.NewKey()
	rk := schemaOne(t, m, unknown, "m", "usu", "n", "1", "U", lease)
	ttl := 2 * defaultRetention // longer than a settle sets: kept
	m.mr.SetTTL(rk, ttl)
	rec, err := m.store.Settle(ctx, idempotency.SettleRequest{Scope: testScope, Key: unknown, Attempts: 1,
		Outcome: effectspec.Accepted, By: "ops", Note: "checked"})
	if err != nil || rec.State != effectspec.Accepted || rec.Resolution == nil {
		t.Fatalf("settle: %+v, %v", rec, err)
	}
	if m.mr.Type(rk) != "string" || m.mr.TTL(rk) != ttl {
		t.Fatalf("settled record: type %s TTL %v, want string and %v kept", m.mr.Type(rk), m.mr.TTL(rk), ttl)
	}
	if rec, err := m.store.Lookup(ctx, testScope, unknown); err != nil || rec.SchemaVersion != schemaVersion ||
		rec.Route.Provider != "stripe" || rec.Route.Fingerprint != hashOf("route") {
		t.Fatalf("lookup after settle: %+v, %v", rec, err)
	}
}

// TestBodyRoundTrip: bodies compressed or not replay byte for byte; a
// record whose compressed body is corrupt or longer than it says is
// refused with errCorruptRecord, never a wrong body.
func TestBodyRoundTrip(t *testing.T) {
	m := newMini(t, Options{MaxResultBytes: 1 << 20})
	big := chargeList(rand.New(rand.NewPCG(3, 3)), 62)
	for _, body := range [][]byte{[]byte("x"), bytes.Repeat([]byte("a"), 129), []byte(strings.Repeat(`{"k":1}`, 40)), big} {
		k := idempotency.NewKey()
		res := mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed)
		mustFinalize(t, m.store, k, res.Token, effectspec.Accepted, &idempotency.StoredResult{Status: 200, Body: body})
		rep := mustClaim(t, m.store, claimReq(k), idempotency.StatusReplay)
		if !bytes.Equal(rep.Record.Result.Body, body) {
			t.Fatalf("body of %d bytes replays as %d bytes", len(body), len(rep.Record.Result.Body))
		}
	}
	k := idempotency.NewKey()
	res := mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed)
	mustFinalize(t, m.store, k, res.Token, effectspec.Accepted, &idempotency.StoredResult{Status: 200,
		Body: []byte(strings.Repeat(`{"amount":1200}`, 20))})
	rk := m.recordKey(t, k)
	if recordFields(t, m.mr, rk)["z"] != "300" {
		t.Fatalf("a 300-byte JSON body is not stored compressed: %q", recordFields(t, m.mr, rk)["z"])
	}
	for name, edit := range map[string]func(map[string]string){
		"longer":  func(f map[string]string) { f["z"] = "299" },
		"shorter": func(f map[string]string) { f["z"] = "301" },
		"huge":    func(f map[string]string) { f["z"] = strconv.Itoa(1 << 40) },
		"corrupt": func(f map[string]string) { f["B"] = "\xff" + f["B"][1:] },
	} {
		orig := recordFields(t, m.mr, rk)
		editRecord(t, m.mr, rk, edit)
		if _, err := m.store.Lookup(ctx, testScope, k); !errors.Is(err, errCorruptRecord) {
			t.Errorf("%s: lookup: %v, want errCorruptRecord", name, err)
		}
		editRecord(t, m.mr, rk, func(f map[string]string) { clear(f); maps.Copy(f, orig) })
	}
}

// TestFinalizeAnswersSmall: the finalize script answers the record without
// the body the caller just sent.
func TestFinalizeAnswersSmall(t *testing.T) {
	m := newMini(t, Options{})
	k := idempotency.NewKey()
	res := mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed)
	body := bytes.Repeat([]byte("0123456789abcdef"), 3000)
	// No incarnation: not checked.
	args := scriptargs.FinalizeSpec.Argv(&scriptargs.Finalize{Token: res.Token, State: "a", Op: opTag('f', "op1"), TTL: "60000", Member: member(k),
		Result: encodeResult(&idempotency.StoredResult{Status: 200, Body: body, Header: http.Header{"Content-Type": {"application/json"}}}, 1<<20)})
	arr, _, err := m.store.execKeys(context.Background(), m.store.sc.finalize, []string{m.recordKey(t, k), m.store.bucketOf(testScope.Workspace, m.recordKey(t, k))}, args, false)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := arr[1].ToString()
	if len(raw) > 256 {
		t.Fatalf("finalize answered %d bytes", len(raw))
	}
	rec, err := decodeStored(testScope, k, raw, 0, schemaVersion)
	if err != nil || rec.State != effectspec.Accepted || rec.Result == nil || rec.Result.Body != nil || rec.Result.Status != 200 {
		t.Fatalf("finalize reply: %+v, %v", rec, err)
	}
}

// TestStaleFinalizeKeepsIndex: a final finalize removes the index entry in
// its script; when it is stale (another attempt took the slot over), it
// writes nothing, so the entry the new attempt wrote stays.
func TestStaleFinalizeKeepsIndex(t *testing.T) {
	m := newMini(t, Options{Lease: time.Second})
	k := idempotency.NewKey()
	mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed)
	m.mr.SetTime(t0.Add(2 * time.Second))
	if res := mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed); res.Token != 2 {
		t.Fatalf("takeover token %d, want 2", res.Token)
	}
	_, err := m.store.Finalize(ctx, idempotency.FinalizeRequest{Scope: testScope, Key: k, Token: 1, Outcome: effectspec.Accepted})
	if !errors.Is(err, idempotency.ErrStale) {
		t.Fatalf("old owner's finalize: %v, want ErrStale", err)
	}
	if _, ok := m.indexScores(t)[member(k)]; !ok {
		t.Fatal("the in-flight attempt lost its index entry to a stale finalize")
	}
	mustFinalize(t, m.store, k, 2, effectspec.Accepted, nil)
	if _, ok := m.indexScores(t)[member(k)]; ok {
		t.Fatal("a final record keeps its index entry")
	}
}

// TestRecordFields: an audit that reads Redis directly sees a compressed
// body as it was sent, secrets and all.
func TestRecordFields(t *testing.T) {
	m := newMini(t, Options{})
	k := idempotency.NewKey()
	res := mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed)
	body := strings.Repeat(`{"token":"sk_live_leaked_0123"},`, 10)
	mustFinalize(t, m.store, k, res.Token, effectspec.Accepted, &idempotency.StoredResult{Status: 200, Body: []byte(body)})
	raw, err := m.mr.Get(m.recordKey(t, k))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(raw, "sk_live_leaked") {
		t.Fatal("setup: the body is not stored compressed")
	}
	flat, err := RecordFields(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(flat, "\n"), body) {
		t.Fatalf("fields %q do not show the body", flat)
	}
	if _, err := RecordFields("not a record"); !errors.Is(err, errCorruptRecord) {
		t.Fatalf("RecordFields of junk: %v", err)
	}
}
