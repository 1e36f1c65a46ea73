package redisstore

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/redistest"
)

// taggedRecord is one record of testdata/layout/schema2-tagged.json: as
// the previous release's scripts wrote it (every record in tagged fields,
// a final one with its incarnation and cycle claim, its body compressed
// at DEFLATE level 5), with what its test needs to act on it.
type taggedRecord struct {
	Key  string `json:"key"`
	Raw  string `json:"raw"`  // hex
	Op   string `json:"op"`   // the finalize's op id (final records)
	Inc  string `json:"inc"`  // the claim's incarnation
	Body string `json:"body"` // the stored body (accepted)
}

func taggedRecords(t testing.TB) map[string]taggedRecord {
	t.Helper()
	b, err := os.ReadFile("testdata/layout/schema2-tagged.json")
	if err != nil {
		t.Fatal(err)
	}
	var recs map[string]taggedRecord
	if err := json.Unmarshal(b, &recs); err != nil {
		t.Fatal(err)
	}
	return recs
}

func (r taggedRecord) key(t testing.TB) idempotency.Key {
	t.Helper()
	k, err := idempotency.ParseKey(r.Key)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func (r taggedRecord) raw(t testing.TB) string {
	t.Helper()
	b, err := hex.DecodeString(r.Raw)
	if err != nil || len(b) == 0 || b[0] != schemaVersion {
		t.Fatalf("fixture %s: %v (%d bytes)", r.Key, err, len(b))
	}
	return string(b)
}

// rawStore is a Redis holding records as strings: miniredis or a real one.
type rawStore struct {
	store *Store
	set   func(t testing.TB, key, raw string)
	get   func(t testing.TB, key string) string
	// frozen: the server's clock is the fixtures' (miniredis at t0), so a
	// record rewritten by a script has the times of one made there.
	frozen bool
}

// TestTaggedRecordsAfterUpgrade: records of the previous layout (all
// tagged fields, read with Go as they are) replay their exact result
// through the scripts, answer a re-sent finalize as applied without a
// write, and are finalized and settled by this release, which writes a
// final record in the final form (on miniredis, whose clock is theirs)
// without incarnation and cycle claim; on miniredis and on a real Redis.
func TestTaggedRecordsAfterUpgrade(t *testing.T) {
	recs := taggedRecords(t)
	// Go alone reads them as they are.
	acc := recs["accepted"]
	rec, err := decodeStored(testScope, acc.key(t), acc.raw(t), 0, schemaVersion)
	if err != nil || rec.State != effectspec.Accepted || rec.Result == nil || string(rec.Result.Body) != acc.Body ||
		rec.Result.Header.Get("Request-Id") != "req_8dk2m4x9q1w7z" {
		t.Fatalf("Go reads the tagged accepted record as %+v, %v", rec, err)
	}

	t.Run("miniredis", func(t *testing.T) {
		m := newMini(t, Options{})
		testTaggedRecords(t, rawStore{store: m.store, frozen: true,
			set: func(t testing.TB, key, raw string) {
				if err := m.mr.Set(key, raw); err != nil {
					t.Fatal(err)
				}
				m.mr.SetTTL(key, time.Hour)
			},
			get: func(t testing.TB, key string) string {
				v, err := m.mr.Get(key)
				if err != nil && !errors.Is(err, miniredis.ErrKeyNotFound) {
					t.Fatal(err)
				}
				return v
			}}, recs)
	})
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		c := realClient(t, srv.Addr())
		testTaggedRecords(t, rawStore{store: realStore(t, c, Options{}),
			set: func(t testing.TB, key, raw string) {
				if err := c.Do(ctx, c.B().Set().Key(key).Value(raw).Px(time.Hour).Build()).Error(); err != nil {
					t.Fatal(err)
				}
			},
			get: func(t testing.TB, key string) string {
				v, err := c.Do(ctx, c.B().Get().Key(key).Build()).ToString()
				if err != nil && !rueidis.IsRedisNil(err) {
					t.Fatal(err)
				}
				return v
			}}, recs)
	})
}

func testTaggedRecords(t *testing.T, rs rawStore, recs map[string]taggedRecord) {
	st := rs.store
	rkey := func(k idempotency.Key) string {
		rk, err := testScope.StorageKey(st.prefix, k)
		if err != nil {
			t.Fatal(err)
		}
		return rk
	}
	load := func(name string) (taggedRecord, idempotency.Key, string) {
		r := recs[name]
		k := r.key(t)
		rk := rkey(k)
		rs.set(t, rk, r.raw(t))
		return r, k, rk
	}

	// A final record replays its exact result; a re-sent finalize is
	// applied and writes nothing; the old worker's renewal is stale.
	acc, k, rk := load("accepted")
	rep := mustClaim(t, st, claimReq(k), idempotency.StatusReplay)
	if r := rep.Record.Result; r == nil || r.Status != 201 || string(r.Body) != acc.Body ||
		r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Request-Id") != "req_8dk2m4x9q1w7z" ||
		rep.Record.Route.Method != "POST" || rep.Record.Route.Host != "api.stripe.com" || rep.Record.AttemptCount != 1 {
		t.Fatalf("replay of a tagged accepted record: %+v, result %+v", rep.Record, rep.Record.Result)
	}
	fin, err := st.Finalize(ctx, idempotency.FinalizeRequest{Scope: testScope, Key: k, Token: 1, Outcome: effectspec.Accepted,
		Result: result201(), OpID: acc.Op, Incarnation: acc.Inc})
	if err != nil || fin.State != effectspec.Accepted || fin.Result == nil || fin.Result.Status != 201 {
		t.Fatalf("re-sent finalize of a tagged record: %+v, %v", fin, err)
	}
	if _, err := st.Renew(ctx, idempotency.RenewRequest{Scope: testScope, Key: k, Token: 1, Incarnation: acc.Inc}); !errors.Is(err, idempotency.ErrStale) {
		t.Fatalf("renewal of a tagged final record: %v, want ErrStale", err)
	}
	if got := rs.get(t, rk); got != acc.raw(t) {
		t.Fatal("a replay, re-sent finalize or renewal of a tagged final record wrote")
	}

	rej, k, _ := load("rejected")
	rep = mustClaim(t, st, claimReq(k), idempotency.StatusReplay)
	if r := rep.Record.Result; rep.Record.State != effectspec.DefinitelyRejected || r == nil || r.Status != 402 ||
		string(r.Body) != `{"error":{"code":"card_declined"}}` {
		t.Fatalf("replay of a tagged rejected record: %+v, result %+v", rep.Record, rep.Record.Result)
	}
	_ = rej

	// An attempt in flight under the old layout: its owner's incarnation
	// is compared while it is in flight, its finalize applies, and the
	// final record it leaves replays what it stored.
	inf, k, rk := load("in_progress")
	if _, err := st.Renew(ctx, idempotency.RenewRequest{Scope: testScope, Key: k, Token: 1, Incarnation: "0123456789abcdef"}); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("another incarnation's renewal of a tagged record in flight: %v, want ErrNotFound", err)
	}
	want := chargeResult(rand.New(rand.NewPCG(9, 9)))
	if _, err := st.Finalize(ctx, idempotency.FinalizeRequest{Scope: testScope, Key: k, Token: 1, Outcome: effectspec.Accepted,
		Result: want, Incarnation: inf.Inc}); err != nil {
		t.Fatalf("finalize of a tagged record in flight: %v", err)
	}
	raw := rs.get(t, rk)
	if rs.frozen && raw[0] != finalForm {
		t.Fatalf("a record finalized accepted is not in the final form: %q", raw[:8])
	}
	flat, err := unpackRecord(raw)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(flat); i += 2 {
		if flat[i] == "i" || flat[i] == "K" {
			t.Fatalf("a final record keeps field %s", flat[i])
		}
	}
	rep = mustClaim(t, st, claimReq(k), idempotency.StatusReplay)
	sameResult(t, rep.Record.Result, want)
	look, err := st.Lookup(ctx, testScope, k)
	if err != nil || look.SchemaVersion != schemaVersion || look.Route.Path != "/v1/charges" || look.VendorKey.IsZero() {
		t.Fatalf("lookup of the finalized record: %+v, %v", look, err)
	}
	sameResult(t, look.Result, want)

	// An unknown record of the old layout settles.
	_, k, rk = load("unknown")
	set, err := st.Settle(ctx, idempotency.SettleRequest{Scope: testScope, Key: k, Attempts: 1,
		Outcome: effectspec.DefinitelyRejected, By: "ops", Note: "refunded", Result: result201()})
	if err != nil || set.State != effectspec.DefinitelyRejected || set.Resolution == nil || set.Resolution.Note != "refunded" {
		t.Fatalf("settle of a tagged unknown record: %+v, %v", set, err)
	}
	if raw := rs.get(t, rk); rs.frozen && raw[0] != finalForm {
		t.Fatalf("a settled record is not in the final form: %q", raw[:8])
	}
	rep = mustClaim(t, st, claimReq(k), idempotency.StatusReplay)
	if rep.Record.Resolution == nil || rep.Record.Resolution.By != "ops" {
		t.Fatalf("replay of the settled record: %+v", rep.Record)
	}
	sameResult(t, rep.Record.Result, result201())
}

func result201() *idempotency.StoredResult {
	return &idempotency.StoredResult{Status: 201, Body: []byte(`{"id":"ch_1"}`), Header: http.Header{"Content-Type": {"application/json"}}}
}

// chargeResult is a realistic stored answer: 1 KiB of JSON, compressed,
// and two kept headers.
func chargeResult(rng *rand.Rand) *idempotency.StoredResult {
	return &idempotency.StoredResult{Status: 201, Body: chargeJSON(rng), Header: http.Header{
		"Content-Type": {"application/json"}, "Request-Id": {"req_" + strconv.FormatUint(rng.Uint64(), 36)}}}
}

// TestFinalFormRoundTrip: every final record the scripts write reads back
// through Lua and Go as it was stored: statuses inside and outside the
// one-byte range, every method code and one without, a dropped body, a
// body stored as sent, no result, headers other than JSON's Content-Type, no vendor key,
// an MCP route (binding meta, an upstream tool, no method) in flight and final.
func TestFinalFormRoundTrip(t *testing.T) {
	m := newMini(t, Options{MaxResultBytes: 4 << 10})
	rng := rand.New(rand.NewPCG(5, 5))
	cases := []struct {
		method   string
		res      *idempotency.StoredResult
		b        effectspec.BindingKind
		upstream string
	}{
		{"POST", chargeResult(rng), effectspec.BindingHeader, ""},
		{"GET", &idempotency.StoredResult{Status: 100}, effectspec.BindingUnsupported, ""},
		{"DELETE", &idempotency.StoredResult{Status: 356, Body: []byte("short")}, effectspec.BindingHeader, ""},
		{"PATCH", &idempotency.StoredResult{Status: 599, Header: http.Header{"Etag": {`"v1"`}, "Content-Type": {"text/plain"}}}, effectspec.BindingBodyPointer, ""},
		{"PROPFIND", &idempotency.StoredResult{Status: 101, Body: bytes.Repeat([]byte("x"), 8<<10)}, effectspec.BindingHeader, ""},
		{"OPTIONS", nil, effectspec.BindingUnsupported, ""},
		{"PUT", &idempotency.StoredResult{Status: 255, Body: bytes.Repeat([]byte(`{"a":1}`), 40)}, effectspec.BindingHeader, ""},
		{"", &idempotency.StoredResult{Status: 200, Body: []byte(`{"content":[]}`)}, effectspec.BindingMeta, "create_payment"},
		{"", nil, effectspec.BindingUnsupported, "send"},
	}
	for _, c := range cases {
		k := idempotency.NewKey()
		req := claimReq(k)
		req.Route.Method, req.Binding, req.Route.UpstreamTool = c.method, c.b, c.upstream
		res := mustClaim(t, m.store, req, idempotency.StatusClaimed)
		if r, err := m.store.Lookup(ctx, testScope, k); err != nil || r.Route.UpstreamTool != c.upstream || r.Binding != c.b {
			t.Fatalf("%s: in flight reads back as %+v, %v", c.method, r.Route, err)
		}
		fin, err := m.store.Finalize(ctx, idempotency.FinalizeRequest{Scope: testScope, Key: k, Token: res.Token, Outcome: effectspec.Accepted,
			Result: c.res, Incarnation: res.Incarnation})
		if err != nil {
			t.Fatalf("%s: %v", c.method, err)
		}
		raw, _ := m.mr.Get(m.recordKey(t, k))
		if raw[0] != finalForm {
			t.Fatalf("%s: not in the final form: %q", c.method, raw[:8])
		}
		rep := mustClaim(t, m.store, req, idempotency.StatusReplay)
		look, err := m.store.Lookup(ctx, testScope, k)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range []idempotency.Record{*rep.Record, look} {
			if r.Route.Method != c.method || r.Route.Host != "api.stripe.com" || r.Route.Path != "/v1/charges" || r.Route.UpstreamTool != c.upstream ||
				r.Binding != c.b || r.AttemptCount != 1 || r.RequestHash != hashOf("args") || r.Route.Fingerprint != hashOf("route") ||
				!r.FinalizedAt.Equal(fin.FinalizedAt) || !r.CreatedAt.Equal(fin.CreatedAt) || (r.VendorKey.IsZero()) != (c.b == effectspec.BindingUnsupported) {
				t.Fatalf("%s: reads back as %+v, finalize answered %+v", c.method, r, fin)
			}
			want := c.res
			if want != nil && len(want.Body) > 4<<10 {
				want = &idempotency.StoredResult{Status: want.Status, BodyDropped: true}
			}
			if want == nil {
				if r.Result != nil && (r.Result.Status != 0 || len(r.Result.Body) != 0) {
					t.Fatalf("%s: a record without a result reads back with %+v", c.method, r.Result)
				}
				continue
			}
			sameResult(t, r.Result, want)
			if r.Result.BodyDropped != want.BodyDropped {
				t.Fatalf("%s: body dropped %v, want %v", c.method, r.Result.BodyDropped, want.BodyDropped)
			}
		}
	}
}

// sameResult fails unless got is want as a replay returns it: status, body
// byte for byte and every kept header.
func sameResult(t testing.TB, got, want *idempotency.StoredResult) {
	t.Helper()
	if got == nil || got.Status != want.Status || !bytes.Equal(got.Body, want.Body) || len(got.Header) != len(want.Header) {
		t.Fatalf("result %+v, want %+v", got, want)
	}
	for name, vals := range want.Header {
		if g := got.Header.Values(name); len(g) != len(vals) || g[0] != vals[0] {
			t.Fatalf("header %s: %q, want %q", name, g, vals)
		}
	}
}
