package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/internal/redistest"
	"github.com/obol-gateway/obol/retry"
)

// benchServer serves the e2e configuration in process, on a store at addr.
func benchServer(b *testing.B, addr string, mini bool) (base string) {
	b.Helper()
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":"obj_1","status":"ok"}`)
	}))
	b.Cleanup(vendor.Close)
	env := func(string) (string, bool) { return e2eSecret, true }
	cfg, err := loadConfig([]byte(strings.ReplaceAll(e2eConfig, "{{VENDOR}}", vendor.URL)), env, &retry.Executor{})
	if err != nil {
		b.Fatal(err)
	}
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(client.Close)
	st, err := redisstore.New(context.Background(), client, redisstore.Options{Prefix: cfg.Store.Prefix, Lease: cfg.Store.Lease, ReadTimeout: storeReadTimeout, SkipEvictionCheck: mini})
	if err != nil {
		b.Fatal(err)
	}
	s := newServer(cfg, st, st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv := httptest.NewServer(s.handler())
	b.Cleanup(srv.Close)
	return srv.URL
}

func postCall(b *testing.B, c *http.Client, base, key, body string) {
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+e2eKeyOne)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Idempotency-Key", key)
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(out), `"outcome":"accepted"`) {
		b.Fatalf("%d %s", resp.StatusCode, out)
	}
}

const benchCapBody = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"cap.mail","arguments":{"to":"ada@example.com"}}}`

const benchBody = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay.charge","arguments":{"amount":1200,"currency":"usd"}}}`

// benchCalls measures whole tools/call round trips over HTTP: a fresh key
// (claim, one vendor request, finalize) or a replay of one key.
func benchCalls(b *testing.B, base string) {
	c := &http.Client{}
	b.Run("fresh", func(b *testing.B) {
		keys := make([]string, b.N)
		for i := range keys {
			keys[i] = idempotency.NewKey().String()
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			postCall(b, c, base, keys[i], benchBody)
		}
	})
	b.Run("replay", func(b *testing.B) {
		k := idempotency.NewKey().String()
		postCall(b, c, base, k, benchBody)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			postCall(b, c, base, k, benchBody)
		}
	})
	// A capability replay adds the read of the shared pin (one GET) to the
	// claim.
	b.Run("capability-replay", func(b *testing.B) {
		k := idempotency.NewKey().String()
		postCall(b, c, base, k, benchCapBody)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			postCall(b, c, base, k, benchCapBody)
		}
	})
	b.Run("fresh-parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			c := &http.Client{}
			for pb.Next() {
				postCall(b, c, base, idempotency.NewKey().String(), benchBody)
			}
		})
	})
}

func BenchmarkToolsCallMiniredis(b *testing.B) {
	mr := miniredis.RunT(b)
	benchCalls(b, benchServer(b, mr.Addr(), true))
}

func BenchmarkToolsCallRedis(b *testing.B) {
	srv := redistest.Start(b)
	benchCalls(b, benchServer(b, srv.Addr(), false))
}
