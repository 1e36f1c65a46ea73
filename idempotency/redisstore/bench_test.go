package redisstore

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/redistest"
)

// claimFinalize makes a fresh claim of k and finalizes it accepted with
// result: a first call's store work.
func claimFinalize(b *testing.B, s *Store, k idempotency.Key, result *idempotency.StoredResult) {
	res, err := s.Claim(b.Context(), claimReq(k))
	if err != nil || res.Status != idempotency.StatusClaimed {
		b.Fatal(res, err)
	}
	if _, err := s.Finalize(b.Context(), idempotency.FinalizeRequest{Scope: testScope, Key: k, Token: res.Token, Outcome: effectspec.Accepted, Result: result}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkClaimFinalize measures a first call's store work: claim (one
// script) and finalize (one script), and a replay (one script). On real
// Redis it also reports the scripts per operation from INFO commandstats.
func BenchmarkClaimFinalize(b *testing.B) {
	result := &idempotency.StoredResult{Status: 201, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"id":"ch_1","amount":1000}`)}
	run := func(b *testing.B, s *Store, count func() int) {
		b.Run("first", func(b *testing.B) {
			before := count()
			b.ReportAllocs()
			for b.Loop() {
				claimFinalize(b, s, idempotency.NewKey(), result)
			}
			if before >= 0 {
				n := count() - before
				b.ReportMetric(float64(n)/float64(b.N), "scripts/op")
			}
		})
		b.Run("replay", func(b *testing.B) {
			k := idempotency.NewKey()
			claimFinalize(b, s, k, result)
			before := count()
			b.ReportAllocs()
			for b.Loop() {
				if res, err := s.Claim(b.Context(), claimReq(k)); err != nil || res.Status != idempotency.StatusReplay {
					b.Fatal(res, err)
				}
			}
			if before >= 0 {
				n := count() - before
				b.ReportMetric(float64(n)/float64(b.N), "scripts/op")
			}
		})
	}
	// A realistic answer as well: 1 KiB of JSON (compressed when stored)
	// and a request id, which the finalize reply decodes without the body.
	b.Run("redis-1KiB", func(b *testing.B) {
		result := &idempotency.StoredResult{Status: 201, Body: benchBody, Header: http.Header{
			"Content-Type": {"application/json"}, "Request-Id": {"req_8dk2m4x9q1w7z"}}}
		srv := redistest.Start(b)
		s := realStore(b, realClient(b, srv.Addr()), Options{})
		b.ReportAllocs()
		for b.Loop() {
			claimFinalize(b, s, idempotency.NewKey(), result)
		}
	})
	b.Run("miniredis", func(b *testing.B) {
		m := newMini(b, Options{})
		run(b, m.store, func() int { return -1 }) // no INFO commandstats
	})
	b.Run("redis", func(b *testing.B) {
		srv := redistest.Start(b)
		c := realClient(b, srv.Addr())
		s := realStore(b, c, Options{})
		run(b, s, func() int {
			m := commandCalls(b, c)
			return m["evalsha"] + m["eval"] + m["evalsha_ro"] + m["eval_ro"] + m["get"] + m["set"]
		})
	})
}

// BenchmarkListUnknown lists a workspace on real Redis: empty (every bucket
// read, none holding anything) and with 10k unknown records (every page, a
// record read per entry). One op is one whole listing, cursor to end.
func BenchmarkListUnknown(b *testing.B) {
	srv := redistest.Start(b)
	c := realClient(b, srv.Addr())
	s := realStore(b, c, Options{})
	listAll := func(b *testing.B, want int) {
		n, cursor := 0, ""
		for {
			p, err := s.ListUnknown(b.Context(), idempotency.ListRequest{Workspace: testScope.Workspace, Cursor: cursor})
			if err != nil {
				b.Fatal(err)
			}
			n += len(p.Records)
			if cursor = p.Cursor; cursor == "" {
				break
			}
		}
		if n != want {
			b.Fatalf("listed %d, want %d", n, want)
		}
	}
	b.Run("empty", func(b *testing.B) {
		for b.Loop() {
			listAll(b, 0)
		}
	})
	const records = 10000
	var wg sync.WaitGroup
	var failed atomic.Bool
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < records; i += 8 {
				k := idempotency.NewKey()
				res, err := s.Claim(b.Context(), claimReq(k))
				if err == nil {
					_, err = s.Finalize(b.Context(), idempotency.FinalizeRequest{Scope: testScope, Key: k, Token: res.Token, Outcome: effectspec.Unknown})
				}
				if err != nil {
					failed.Store(true)
					return
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() {
		b.Fatal("setup: a claim or finalize failed")
	}
	b.Run("10k", func(b *testing.B) {
		for b.Loop() {
			listAll(b, records)
		}
	})
}

// benchBody is a charge as a payment API answers one: 1 KiB of JSON.
var benchBody = []byte(`{"id":"ch_3PqL2xKZ8vN4cT1a0bRk7YwE","object":"charge","amount":4200,"balance_transaction":"txn_3PqL2xKZ8vN4cT1a0uJm2Qp9",` +
	`"billing_details":{"address":{"city":"Portland","country":"US","line1":"1847 Glenwood Ave","postal_code":"97205","state":"OR"},` +
	`"email":"mara.okafor@example.com","name":"Mara Okafor","phone":"+15035550142"},"captured":true,"created":1732981544,` +
	`"currency":"usd","customer":"cus_R7wXb2LpQ9mZtc","metadata":{"order_id":"ord_58213","tool_call":"idt_5c1f0a2b3c4d5e6f708192a3b4c5d6e7"},` +
	`"outcome":{"network_status":"approved_by_network","risk_level":"normal","risk_score":32,"type":"authorized"},"paid":true,` +
	`"payment_intent":"pi_3PqL2xKZ8vN4cT1a0Hs6DfG3","payment_method":"pm_1PqL2wKZ8vN4cT1aYt5Rn8Lq","payment_method_details":` +
	`{"card":{"brand":"visa","checks":{"cvc_check":"pass"},"country":"US","exp_month":8,"exp_year":2029,"fingerprint":"Xt4b7QmK2pLw9ZsR",` +
	`"funding":"credit","last4":"4242"},"type":"card"},"receipt_url":"https://pay.example.com/receipts/ch_3PqL2xKZ8vN4cT1a0bRk7YwE",` +
	`"status":"succeeded"}`)

// BenchmarkStoreGoSide measures what Claim and Finalize compute around their
// scripts, without Redis: the claim's arguments, and the finalize's
// arguments and the decoding of the record its script answers.
func BenchmarkStoreGoSide(b *testing.B) {
	m := newMini(b, Options{})
	result := &idempotency.StoredResult{Status: 201, Body: benchBody, Header: http.Header{
		"Content-Type": {"application/json"}, "Request-Id": {"req_8dk2m4x9q1w7z"}}}
	k := idempotency.NewKey()
	res := mustClaim(b, m.store, claimReq(k), idempotency.StatusClaimed)
	mustFinalize(b, m.store, k, res.Token, effectspec.Accepted, result)
	raw, err := m.mr.Get(m.recordKey(b, k))
	if err != nil {
		b.Fatal(err)
	}
	// The reply: the record without its body's size and body, as the
	// scripts write it.
	common, err := luaFS.ReadFile("lua/common.lua")
	if err != nil {
		b.Fatal(err)
	}
	head, err := rueidis.NewLuaScript(string(common)+"\nreturn encode(decode(ARGV[1]), false)").
		Exec(b.Context(), m.client, []string{"k"}, []string{raw}).ToString()
	if err != nil || len(head) >= len(raw)-100 || len(head) < 100 {
		b.Fatalf("the record without its body: %d of %d bytes, %v", len(head), len(raw), err)
	}
	b.Run("claim-prep", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := m.store.claimPrep(claimReq(k)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("finalize-prep", func(b *testing.B) {
		b.ReportAllocs()
		req := idempotency.FinalizeRequest{Scope: testScope, Key: k, Token: 1, Outcome: effectspec.Accepted, Result: result}
		for b.Loop() {
			if _, _, err := m.store.finalizePrep(req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("finalize-reply", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeStored(testScope, k, head, 0, schemaVersion); err != nil {
				b.Fatal(err)
			}
		}
	})
}
