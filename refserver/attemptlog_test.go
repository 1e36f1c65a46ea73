package main

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/obol-gateway/obol/idempotency"
)

// At Info, a call whose only attempt answered 2xx writes one line (its
// tools/call line says the status and the attempt count); an attempt that
// answered anything else keeps its own line.
func TestAttemptLogLines(t *testing.T) {
	nango := newFakeNango(t)
	var logs syncBuffer
	base := inProcessLog(t, strings.ReplaceAll(federatedConfig, "{{NANGO}}", nango.URL), testEnv, slog.New(slog.NewTextHandler(&logs, nil)))

	s := newSession(t, base, e2eKeyOne, idempotency.NewKey().String())
	call(t, s, "gh.create_issue", map[string]any{"title": "x"}, "").wantOutcome(t, "accepted", false)
	// A call's line is written once its answer has left.
	if l := logs.Wait("msg=tools/call", 1, 10*time.Second); strings.Count(l, "msg=tools/call") != 1 || strings.Contains(l, "msg=attempt") {
		t.Fatalf("a clean call's lines:\n%s", l)
	}
	s = newSession(t, base, e2eKeyOne, idempotency.NewKey().String())
	call(t, s, "gh.500", map[string]any{"title": "x"}, "").wantOutcome(t, "unknown", false)
	l := logs.Wait("msg=tools/call", 2, 10*time.Second)
	if strings.Count(l, "msg=tools/call") != 2 || strings.Count(l, "msg=attempt") != 1 || !strings.Contains(l, "msg=attempt workspace=ws_one tool=gh.500") ||
		!strings.Contains(l, "status=500") {
		t.Fatalf("a 500's lines:\n%s", l)
	}
}
