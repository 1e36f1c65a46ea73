package main

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/retry"
)

// At Info, a call whose only attempt answered 2xx writes one line (its
// tools/call line says the status and the attempt count); an attempt that
// answered anything else keeps its own line.
func TestAttemptLogLines(t *testing.T) {
	nango := newFakeNango(t)
	cfg, err := loadConfig([]byte(strings.ReplaceAll(federatedConfig, "{{NANGO}}", nango.URL)), testEnv, &retry.Executor{})
	if err != nil {
		t.Fatal(err)
	}
	mr := miniredis.RunT(t)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	st, err := redisstore.New(context.Background(), client, redisstore.Options{Prefix: cfg.Store.Prefix, Lease: cfg.Store.Lease, ReadTimeout: storeReadTimeout, SkipEvictionCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	srv := httptest.NewServer(newServer(cfg, st, st, slog.New(slog.NewTextHandler(&logs, nil))).handler())
	t.Cleanup(srv.Close)

	s := newSession(t, srv.URL, e2eKeyOne, idempotency.NewKey().String())
	call(t, s, "gh.create_issue", map[string]any{"title": "x"}, "").wantOutcome(t, "accepted", false)
	if l := logs.String(); strings.Count(l, "msg=tools/call") != 1 || strings.Contains(l, "msg=attempt") {
		t.Fatalf("a clean call's lines:\n%s", l)
	}
	s = newSession(t, srv.URL, e2eKeyOne, idempotency.NewKey().String())
	call(t, s, "gh.500", map[string]any{"title": "x"}, "").wantOutcome(t, "unknown", false)
	l := logs.String()
	if strings.Count(l, "msg=tools/call") != 2 || strings.Count(l, "msg=attempt") != 1 || !strings.Contains(l, "msg=attempt workspace=ws_one tool=gh.500") ||
		!strings.Contains(l, "status=500") {
		t.Fatalf("a 500's lines:\n%s", l)
	}
}
