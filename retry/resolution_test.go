package retry

import (
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/receipt"
)

// TestReceiptResolution: a settled record's receipt carries who, when and
// why; any other record's carries none.
func TestReceiptResolution(t *testing.T) {
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	scope := idempotency.Scope{Workspace: "ws_acme", Connection: "conn_x", Tool: "x.send"}
	rec := idempotency.Record{State: effectspec.DefinitelyRejected, Key: idempotency.NewKey(), KeySource: idempotency.KeySupplied,
		Binding: effectspec.BindingUnsupported, AttemptCount: 1, FinalizedAt: at,
		Resolution: &receipt.Resolution{Outcome: effectspec.DefinitelyRejected, By: "ops", At: at, Note: "no charge"}}
	r := rec.Receipt(scope, false)
	want := receipt.Resolution{Outcome: effectspec.DefinitelyRejected, By: "ops", At: at, Note: "no charge"}
	if r.Resolution == nil || *r.Resolution != want {
		t.Fatalf("resolution %+v, want %+v", r.Resolution, want)
	}
	if r.Outcome != effectspec.DefinitelyRejected {
		t.Fatalf("outcome %q", r.Outcome)
	}
	rec.Resolution = nil
	if r := rec.Receipt(scope, false); r.Resolution != nil {
		t.Fatal("an unsettled record's receipt has a resolution")
	}
}
