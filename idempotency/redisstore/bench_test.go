package redisstore

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/obol-gateway/obol/effectspec"
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
				if _, err := s.Finalize(b.Context(), idempotency.FinalizeRequest{Scope: testScope, Key: k, Token: res.Token, Outcome: effectspec.Accepted, Result: result}); err != nil {
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
			if _, err := s.Finalize(b.Context(), idempotency.FinalizeRequest{Scope: testScope, Key: k, Token: res.Token, Outcome: effectspec.Accepted, Result: result}); err != nil {
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
