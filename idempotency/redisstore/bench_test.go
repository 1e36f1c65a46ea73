package redisstore

import (
	"net/http"
	"testing"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/redistest"
)

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
				k := idempotency.NewKey()
				res, err := s.Claim(b.Context(), claimReq(k))
				if err != nil || res.Status != idempotency.StatusClaimed {
					b.Fatal(res, err)
				}
				if _, err := s.Finalize(b.Context(), idempotency.FinalizeRequest{Scope: testScope, Key: k, Token: res.Token, Outcome: idempotency.StateAccepted, Result: result}); err != nil {
					b.Fatal(err)
				}
			}
			if before >= 0 {
				n := count() - before
				b.ReportMetric(float64(n)/float64(b.N), "scripts/op")
			}
		})
		b.Run("replay", func(b *testing.B) {
			k := idempotency.NewKey()
			res, _ := s.Claim(b.Context(), claimReq(k))
			if _, err := s.Finalize(b.Context(), idempotency.FinalizeRequest{Scope: testScope, Key: k, Token: res.Token, Outcome: idempotency.StateAccepted, Result: result}); err != nil {
				b.Fatal(err)
			}
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
