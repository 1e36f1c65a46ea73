package receipt_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/receipt"
)

var update = flag.Bool("update", false, "rewrite golden files")

func sample() receipt.Receipt {
	created := time.Date(2026, 11, 30, 10, 0, 0, 123456789, time.FixedZone("x", 3600))
	return receipt.Receipt{
		IdempotencyKey: "idt_5c1f0a9e2b7d4c3e8f6a1b2c3d4e5f60",
		KeySource:      "supplied",
		RequestHash:    "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a",
		Tool:           "stripe.create_charge",
		Workspace:      "ws_acme",
		Route: receipt.RouteRecord{Connection: "conn_stripe", Provider: "stripe", Tool: "stripe.create_charge", Method: "POST",
			Host: "api.stripe.com", Path: "/v1/charges", Fingerprint: "sha256:0f"},
		Binding:      "header",
		Propagation:  "header",
		VendorKey:    "idt_9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d",
		AttemptCount: 1,
		Outcome:      effectspec.Accepted,
		Status:       201,
		CreatedAt:    created,
		FinalizedAt:  created.Add(250 * time.Millisecond),
		SafeNewKey:   receipt.Safe(false),
	}
}

func TestGolden(t *testing.T) {
	held := sample()
	held.Outcome, held.Status, held.AttemptCount, held.FinalizedAt = effectspec.Held, 0, 0, time.Time{}
	settled := sample()
	settled.Binding, settled.Propagation, settled.VendorKey, settled.Status = "unsupported", "none", "", 0
	settled.Resolution = &receipt.Resolution{Outcome: effectspec.Accepted, By: "ops@acme", At: settled.FinalizedAt, Note: "checked: ch_1 exists"}
	rejected := sample()
	rejected.Outcome, rejected.Status, rejected.SafeNewKey = effectspec.DefinitelyRejected, 402, receipt.Safe(true)
	unset := sample()
	unset.SafeNewKey = nil
	for name, r := range map[string]receipt.Receipt{"accepted": sample(), "held": held, "settled": settled,
		"rejected": rejected, "safe_unknown": unset} {
		t.Run(name, func(t *testing.T) {
			got, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", name+".golden.json")
			if *update {
				if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != strings.TrimSpace(string(want)) {
				t.Errorf("encoding changed:\n got %s\nwant %s", got, want)
			}
		})
	}
}

func TestFieldOrderAndOmission(t *testing.T) {
	r := sample()
	r.Status, r.FinalizedAt = 0, time.Time{}
	b, _ := json.Marshal(r)
	s := string(b)
	if strings.Contains(s, `"status"`) || strings.Contains(s, `"finalized_at"`) || strings.Contains(s, `"resolution"`) {
		t.Errorf("unset status/finalized_at/resolution must be omitted: %s", s)
	}
	if !strings.HasPrefix(s, `{"idempotency_key":`) || !strings.HasSuffix(s, `"created_at":"2026-11-30T09:00:00.123Z"}`) {
		t.Errorf("field order or time format changed: %s", s)
	}
}

func TestRedactor(t *testing.T) {
	red := receipt.NewRedactor("sk_live_123", "")
	if got := red.String("auth failed for sk_live_123 at sk_live_1234"); strings.Contains(got, "sk_live_123") {
		t.Errorf("secret survived: %q", got)
	}
	var zero receipt.Redactor
	if got := zero.String("x"); got != "x" {
		t.Errorf("zero Redactor changed text: %q", got)
	}
}
