package proof

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/redistest"
)

const (
	manyGateways   = 4
	keysPerRound   = 32
	callersPerKey  = 8
	vendorDelay    = 150 * time.Millisecond // long enough that contenders overlap
	callersInRound = keysPerRound * callersPerKey
)

// TestManyGateways runs 256 concurrent raw MCP clients against 4 refserver
// processes sharing one Redis: 32 keys, each sent by 8 clients spread over
// the 4 gateways, once per binding kind. Each key must reach the vendor
// exactly once, every caller must get the same result or in_progress, and
// the receipts of all gateways must agree.
func TestManyGateways(t *testing.T) {
	start := time.Now()
	redis := redistest.Start(t)
	v := newVendor(t, vendorDelay)
	cfg := writeConfig(t, gatewayConfig(v.URL, "10s"))
	gws := make([]*gateway, manyGateways)
	var wg sync.WaitGroup
	for i := range gws {
		wg.Go(func() { gws[i] = startGateway(t, cfg, "redis://"+redis.Addr()) })
	}
	wg.Wait()
	for _, g := range gws {
		if g == nil {
			t.FailNow() // startGateway reported why
		}
	}
	var f figures
	fresh, replays, inProgress := 0, 0, 0
	for _, b := range bindingTools {
		keys := make([]string, keysPerRound)
		for i := range keys {
			keys[i] = idempotency.NewKey().String()
		}
		replies := make([]reply, callersInRound)
		gate := make(chan struct{})
		for i := range replies {
			wg.Go(func() {
				key := keys[i/callersPerKey]
				<-gate
				// Callers of a key arrive 40ms apart, so some overlap the
				// vendor's answer (in_progress) and some come after it (replay).
				time.Sleep(time.Duration(i%callersPerKey) * 40 * time.Millisecond)
				// Callers of one key: i%8 spreads them two per gateway.
				replies[i] = callTool(context.Background(), gws[i%manyGateways].base, b.tool, key, map[string]any{"ref": key, "amount": 1200})
			})
		}
		close(gate)
		wg.Wait()
		f.calls += len(replies)

		for k, key := range keys {
			var text string
			freshN := 0
			for _, r := range replies[k*callersPerKey : (k+1)*callersPerKey] {
				switch {
				case r.transport != nil:
					t.Errorf("%s %s: %v", b.binding, key, r)
				case r.refused:
					if r.refusal.Data.Reason != "in_progress" || r.refusal.Data.Status != 409 {
						t.Errorf("%s %s: %v, want a result or in_progress", b.binding, key, r)
					}
					inProgress++
				default:
					rc := r.result.Meta.Receipt
					if rc.Outcome != "accepted" || rc.AttemptCount != 1 || rc.IdempotencyKey != key || r.result.Meta.Key != key || rc.Binding != b.binding {
						t.Errorf("%s %s: %v, receipt %+v", b.binding, key, r, rc)
					}
					if !rc.Replayed {
						freshN++
						fresh++
					} else {
						replays++
					}
					if text == "" {
						text = r.text()
					} else if r.text() != text {
						t.Errorf("%s %s: results differ: %q vs %q", b.binding, key, r.text(), text)
						f.duplicates++
					}
				}
			}
			if freshN > 1 {
				t.Errorf("%s %s: %d callers got a fresh (not replayed) result", b.binding, key, freshN)
			}
			n := v.count(key)
			if n != 1 {
				t.Errorf("%s %s: the vendor saw %d requests, want exactly 1", b.binding, key, n)
			}
			if n > 1 {
				f.duplicates += n - 1
			}
			// Every gateway reads the same receipt.
			var first wireReceipt
			for gi, g := range gws {
				code, rc, raw := getReceipt(t, g.base, b.tool, key)
				if code != 200 {
					t.Errorf("%s %s: receipt from gateway %d: %d %s", b.binding, key, gi, code, raw)
					f.recordsLost++
					continue
				}
				if gi == 0 {
					first = rc
				} else if !reflect.DeepEqual(rc, first) { // SafeNewKey is a *bool: compare what it points to
					t.Errorf("%s %s: gateway %d's receipt %+v differs from gateway 0's %+v", b.binding, key, gi, rc, first)
				}
				if rc.AttemptCount != n {
					f.attemptMismatches++
				}
			}
			if first.Outcome != "accepted" || first.AttemptCount != 1 || first.Replayed {
				t.Errorf("%s %s: receipt %+v", b.binding, key, first)
			}
			// The vendor saw the receipt's vendor key, never the client's.
			if sent := v.sentKey(key); sent != first.VendorKey || (b.binding != "unsupported") != (sent != "") {
				t.Errorf("%s %s: vendor saw key %q, receipt vendor_key %q", b.binding, key, sent, first.VendorKey)
			}
		}
	}
	v.integrity(t)
	f.note("fresh=%d replays=%d in_progress=%d vendor_requests=%d", fresh, replays, inProgress, v.total())
	f.report(t, start)
}
