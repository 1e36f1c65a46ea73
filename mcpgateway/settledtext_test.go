package mcpgateway

import (
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/receipt"
	"github.com/obol-gateway/obol/retry"
)

// TestSettledReplayText: a call an operator settled without the vendor's
// answer replays with who settled it and when, for either outcome; a
// settled definitely_rejected is never "rejected by the vendor (status 0)".
// A vendor's own rejection without a body still quotes its status.
func TestSettledReplayText(t *testing.T) {
	at := time.Date(2026, 12, 2, 7, 45, 1, 234e6, time.UTC)
	text := func(rc receipt.Receipt, res *idempotency.StoredResult) (string, bool) {
		r := result(retry.Answer{Receipt: rc, Result: res}, nil, false)
		return r.Content[0].(*mcp.TextContent).Text, r.IsError
	}
	for _, outcome := range []effectspec.Outcome{effectspec.DefinitelyRejected, effectspec.Accepted} {
		rc := receipt.Receipt{Outcome: outcome, Replayed: true,
			Resolution: &receipt.Resolution{Outcome: outcome, By: "ops-alice", At: at, Note: "checked"}}
		got, isError := text(rc, nil)
		want := string(outcome) + ": settled by ops-alice at 2026-12-02T07:45:01.234Z after checking with the vendor"
		if !strings.HasPrefix(got, want) || strings.Contains(got, "status 0") || isError != (outcome != effectspec.Accepted) {
			t.Errorf("%s: text %q isError %v, want it to begin %q", outcome, got, isError, want)
		}
	}
	if got, _ := text(receipt.Receipt{Outcome: effectspec.DefinitelyRejected, Status: 402}, &idempotency.StoredResult{Status: 402}); got != "rejected by the vendor (status 402)" {
		t.Errorf("vendor rejection without a body: %q", got)
	}
	// A settlement that carried the vendor's answer replays the answer.
	rc := receipt.Receipt{Outcome: effectspec.DefinitelyRejected, Status: 402,
		Resolution: &receipt.Resolution{Outcome: effectspec.DefinitelyRejected, By: "ops-alice", At: at}}
	if got, _ := text(rc, &idempotency.StoredResult{Status: 402, Body: []byte("card declined")}); got != "card declined" {
		t.Errorf("settled with the vendor's body: %q", got)
	}
}
