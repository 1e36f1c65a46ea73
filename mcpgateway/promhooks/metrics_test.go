package promhooks

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/obol-gateway/obol/mcpgateway"
	"github.com/obol-gateway/obol/retry"
)

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Body.String()
}

type counts map[string]int

func (c counts) CountUnknown(_ context.Context, ws string) (int, error) {
	if ws == "ws_bad" {
		return 0, errors.New("down")
	}
	return c[ws], nil
}

// TestOperatorSeries: the operator's series exist at zero before the first
// event, obol_unknown_calls shows the store's reading, and data loss and
// settlements report what they are given.
func TestOperatorSeries(t *testing.T) {
	m := New()
	m.WatchUnknown([]string{"ws_a", "ws_b"}, counts{"ws_a": 3}, nil)
	out := scrape(t, m) // starts the first reading
	for _, want := range []string{`obol_quota_refusals_total{workspace="ws_a"} 0`, `obol_quota_refusals_total{workspace="ws_b"} 0`,
		`obol_settlements_total{outcome="accepted"} 0`, `obol_settlements_total{outcome="definitely_rejected"} 0`, "obol_store_data_lost 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out, `obol_unknown_calls{workspace="ws_a"} 3`) || !strings.Contains(out, `obol_unknown_calls{workspace="ws_b"} 0`) {
		if time.Now().After(deadline) {
			t.Fatalf("obol_unknown_calls never read:\n%s", out)
		}
		time.Sleep(10 * time.Millisecond)
		out = scrape(t, m)
	}
	m.SetDataLost(func() bool { return true })
	m.Settlement("accepted")
	out = scrape(t, m)
	for _, want := range []string{"obol_store_data_lost 1", `obol_settlements_total{outcome="accepted"} 1`} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
}

// TestInstrumentChains: the hooks set before Instrument still run, and the
// background recoveries are counted and gauged.
func TestInstrumentChains(t *testing.T) {
	var got []string
	orch := &retry.Orchestrator{
		OnStoreError:    func(_ *retry.Call, op string, _ error) { got = append(got, "orch "+op) },
		OnClaimRecovery: func(_ *retry.Call, ev retry.ClaimRecovery) { got = append(got, "recovery "+string(ev)) },
	}
	gc := mcpgateway.Config{Orchestrator: orch,
		OnStoreError: func(op string) { got = append(got, "gateway "+op) },
		OnProbe:      func(method string) { got = append(got, "probe "+method) },
	}
	m := New()
	m.Instrument(&gc)
	gc.OnStoreError("lookup")
	gc.OnProbe("GET")
	orch.OnStoreError(&retry.Call{}, "claim", errors.New("x"))
	orch.OnClaimRecovery(&retry.Call{}, retry.RecoveryStarted)
	orch.OnClaimRecovery(&retry.Call{}, retry.RecoveryStarted)
	orch.OnClaimRecovery(&retry.Call{}, retry.RecoveryDropped)
	orch.OnClaimRecovery(&retry.Call{}, retry.RecoverySettled)
	if want := "gateway lookup,probe GET,orch claim,recovery started,recovery started,recovery dropped,recovery settled"; strings.Join(got, ",") != want {
		t.Errorf("hooks ran %v, want %s", got, want)
	}
	out := scrape(t, m)
	for _, want := range []string{`obol_store_errors_total{op="lookup"} 1`, `obol_store_errors_total{op="claim"} 1`, "obol_mcp_probes_total 1",
		`obol_claim_recoveries_total{result="started"} 2`, "obol_claim_recoveries_running 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
}
