package proof

import (
	"context"
	"testing"
	"time"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/redistest"
	"github.com/obol-gateway/obol/proof/internal/faultproxy"
)

// crashWindow is a point in a call's life where its gateway dies.
type crashWindow struct {
	name string
	// arm prepares the hook for key; fire waits until the call sits in the
	// window. The gateway is killed right after fire returns.
	arm func(p *faultproxy.Proxy, v *vendor, key string) (fire func(t *testing.T), release func())
}

// The windows, and how each is reached deterministically:
//
//   - a: the claim script ran in Redis (the attempt is reserved) and the proxy
//     withholds its reply: the gateway cannot have sent anything.
//   - b: the vendor read the request and blocks before answering: the
//     attempt reached the vendor, no finalize ran.
//   - c1: the finalize script is held by the proxy before Redis sees it: the
//     vendor answered, the record is still in flight.
//   - c2: the finalize script ran in Redis and the proxy withholds its reply:
//     the record is final, the gateway never learnt it.
var crashWindows = []crashWindow{
	{"a_after_claim_before_send", func(p *faultproxy.Proxy, _ *vendor, key string) (func(*testing.T), func()) {
		p.SetRule(faultproxy.OnScript("claim", key, faultproxy.HoldReply))
		return func(t *testing.T) { waitEvent(t, p, 10*time.Second) }, func() {}
	}},
	{"b_vendor_read_before_finalize", func(_ *faultproxy.Proxy, v *vendor, key string) (func(*testing.T), func()) {
		arrived, release := make(chan struct{}, 1), make(chan struct{})
		v.setBlock(func(ref string) {
			if ref == key {
				arrived <- struct{}{}
				<-release
			}
		})
		return func(t *testing.T) {
				select {
				case <-arrived:
				case <-time.After(10 * time.Second):
					t.Fatal("the request never reached the vendor")
				}
			}, func() {
				close(release)
				v.setBlock(nil)
			}
	}},
	{"c1_finalize_not_applied", func(p *faultproxy.Proxy, _ *vendor, key string) (func(*testing.T), func()) {
		p.SetRule(faultproxy.OnScript("finalize", key, faultproxy.HoldCommand))
		return func(t *testing.T) { waitEvent(t, p, 10*time.Second) }, func() {}
	}},
	{"c2_finalize_applied_reply_lost", func(p *faultproxy.Proxy, _ *vendor, key string) (func(*testing.T), func()) {
		p.SetRule(faultproxy.OnScript("finalize", key, faultproxy.HoldReply))
		return func(t *testing.T) { waitEvent(t, p, 10*time.Second) }, func() {}
	}},
}

// crashWant is what the retry through the other gateway must show.
type crashWant struct {
	refusal  string // "" for a result
	outcome  string // receipt outcome (of the result, or of GET /v1/receipts)
	replayed bool
	attempts int
	vendor   int // requests the vendor saw for the key, in all
}

func wantAfterCrash(binding, window string) crashWant {
	if binding == "unsupported" {
		switch window[:2] {
		case "a_":
			return crashWant{"outcome_unknown", "unknown", false, 1, 0}
		case "c2":
			return crashWant{"", "accepted", true, 1, 1}
		}
		return crashWant{"outcome_unknown", "unknown", false, 1, 1}
	}
	switch window[:2] {
	case "a_":
		// Attempt 1 was reserved and never sent; attempt 2 went out.
		return crashWant{"", "accepted", false, 2, 1}
	case "c2":
		return crashWant{"", "accepted", true, 1, 1}
	}
	return crashWant{"", "accepted", false, 2, 2}
}

// TestCrashMatrix kills a gateway with SIGKILL in each window of a call, for
// each binding, and retries the same key through another gateway after the
// lease (1s).
func TestCrashMatrix(t *testing.T) {
	start := time.Now()
	redis := redistest.Start(t)
	v := newVendor(t, 0)
	cfg := writeConfig(t, gatewayConfig(v.URL, "1s"))
	other := startGateway(t, cfg, "redis://"+redis.Addr())
	var f figures
	unsent := 0
	for _, b := range bindingTools {
		for _, w := range crashWindows {
			t.Run(b.binding+"/"+w.name, func(t *testing.T) {
				key := idempotency.NewKey().String()
				args := map[string]any{"ref": key, "amount": 700}
				proxy := newFaultProxy(t, redis.Addr())
				victim := startGateway(t, cfg, "redis://"+proxy.Addr())
				fire, release := w.arm(proxy, v, key)

				lost := make(chan reply, 1)
				go func() { lost <- callTool(context.Background(), victim.base, b.tool, key, args) }()
				fire(t)
				seenAtCrash := v.count(key)
				victim.kill9(t)
				release()
				if r := <-lost; r.transport == nil {
					t.Errorf("the call through the killed gateway answered: %v", r)
				}
				f.calls++

				// Retry through the other gateway until the lease is over.
				var r reply
				inProgress := 0
				deadline := time.Now().Add(15 * time.Second)
				for {
					r = callTool(context.Background(), other.base, b.tool, key, args)
					f.calls++
					if !r.refused || r.refusal.Data.Reason != "in_progress" || time.Now().After(deadline) {
						break
					}
					inProgress++
					time.Sleep(100 * time.Millisecond)
				}
				if r.transport != nil {
					t.Fatalf("retry: %v", r)
				}
				want := wantAfterCrash(b.binding, w.name)
				code, rc, raw := getReceipt(t, other.base, b.tool, key)
				if code != 200 {
					t.Fatalf("receipt: %d %s", code, raw)
				}
				seen := v.count(key)
				t.Logf("vendor saw %d at the crash, %d in all; retry: %v (after %d in_progress); receipt attempts=%d outcome=%s",
					seenAtCrash, seen, r, inProgress, rc.AttemptCount, rc.Outcome)

				switch {
				case want.refusal != "":
					if !r.refused || r.refusal.Data.Reason != want.refusal {
						t.Errorf("retry: %v, want refusal %s", r, want.refusal)
					}
				default:
					got := r.result.Meta.Receipt
					if r.refused || string(got.Outcome) != want.outcome || got.Replayed != want.replayed || got.AttemptCount != want.attempts {
						t.Errorf("retry: %v, want outcome %s replayed %v attempts %d", r, want.outcome, want.replayed, want.attempts)
					}
				}
				if string(rc.Outcome) != want.outcome || rc.AttemptCount != want.attempts {
					t.Errorf("receipt: outcome %s attempts %d, want %s %d", rc.Outcome, rc.AttemptCount, want.outcome, want.attempts)
				}
				if seen != want.vendor {
					t.Errorf("vendor saw %d requests, want %d", seen, want.vendor)
				}
				if seen > rc.AttemptCount || (b.binding == "unsupported" && seen > 1) {
					f.duplicates++
				}
				if seen != rc.AttemptCount {
					// The contract's attempt_count counts what the vendor could
					// have seen: only an attempt reserved and provably never
					// sent (window a) may be counted without a request.
					if w.name[:2] == "a_" && seen == rc.AttemptCount-1 {
						unsent++
					} else {
						f.attemptMismatches++
					}
				}
				// The record must survive every crash.
				if code == 404 {
					f.recordsLost++
				}
			})
		}
	}
	v.integrity(t)
	f.note("reserved_never_sent=%d (window a, counted by attempt_count as the contract's upper bound)", unsent)
	f.report(t, start)
}
