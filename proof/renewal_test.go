package proof

import (
	"context"
	"encoding/json"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/internal/redistest"
)

// renewalLease is the store lease of the renewal tests: short, so that one
// call outlives many leases, and at least the refserver's minimum.
const renewalLease = 2 * time.Second

// longCallLease is TestLongCallRenewsLease's lease: its owner renews every
// third of it, so a 2 s lease lapsed when the gateway was starved for 1.3 s
// (a full race run beside two more test binaries); 3 s rides out 2 s.
const longCallLease = 3 * time.Second

// slowConfig renders a refserver configuration whose tools may run 30s per
// attempt (EffectSpec timeout) under a store lease of lease.
func slowConfig(vendorURL, lease string) string {
	return `{
  "key_prefix": "proof:", "lease": "` + lease + `", "environment": "test",
  "workspaces": [{"id": "` + workspace + `", "api_keys": ["` + apiKey + `"]}],
  "approver_keys": [{"name": "proof-operator", "key": "` + approverKey + `"}],
  "connections": [{"id": "conn_v", "provider": "proofvendor", "base_url": "` + vendorURL + `", "secret_env": "PROOF_VENDOR_SECRET"}],
  "tools": [
    {"connection": "conn_v", "path": "/charge", "spec": {"tool": "pay.charge", "timeout": "30s",
      "idempotency": {"binding": "header", "header": "Idempotency-Key"}, "status": {"accepted": [201]}}},
    {"connection": "conn_v", "path": "/chat", "spec": {"tool": "chat.post", "timeout": "30s",
      "idempotency": {"binding": "unsupported"}, "status": {"accepted": [201]}}}
  ]
}`
}

// holdFirst makes v block the first request of key until release is
// closed; arrived is closed when that request reached the vendor. Later
// requests of key are answered at once.
func holdFirst(t testing.TB, v *vendor, key string) (arrived <-chan struct{}, release func()) {
	arr, rel := make(chan struct{}), make(chan struct{})
	var once, relOnce sync.Once
	first := true
	var mu sync.Mutex
	v.setBlock(func(ref string) {
		if ref != key {
			return
		}
		mu.Lock()
		hold := first
		first = false
		mu.Unlock()
		if hold {
			once.Do(func() { close(arr) })
			<-rel
		}
	})
	release = func() { relOnce.Do(func() { close(rel) }) }
	t.Cleanup(release)
	return arr, release
}

// retryAfterMS reads error.data.retry_after_ms of an in_progress refusal
// (-1 when it is absent).
func retryAfterMS(r reply) int64 {
	var env struct {
		Error struct {
			Data struct {
				RetryAfterMS *int64 `json:"retry_after_ms"`
			} `json:"data"`
		} `json:"error"`
	}
	if json.Unmarshal(r.body, &env) != nil || env.Error.Data.RetryAfterMS == nil {
		return -1
	}
	return *env.Error.Data.RetryAfterMS
}

// recordReader reads records straight from Redis through the store's own
// Lookup (a lapsed in_progress lease reads unknown).
func recordReader(t testing.TB, addr string) func(tool, key string) idempotency.Record {
	store := newStore(t, newClient(t, addr), redisstore.Options{Prefix: "proof:", Lease: renewalLease})
	return func(tool, key string) idempotency.Record {
		t.Helper()
		k, err := idempotency.ParseKey(key)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rec, err := store.Lookup(ctx, idempotency.Scope{Workspace: workspace, Connection: "conn_v", Tool: tool}, k)
		if err != nil {
			t.Fatalf("lookup %s: %v", tool, err)
		}
		return rec
	}
}

// TestLongCallRenewsLease calls a tool whose vendor holds the request for
// ten store leases (2s lease, 30s tool timeout) through a refserver on
// real Redis. While the vendor holds it, the same key through another
// gateway is in_progress with a retry_after_ms every time, and the record
// stays in_progress with a lease deadline that only moves forward; the call
// then completes accepted with one attempt and one vendor request.
func TestLongCallRenewsLease(t *testing.T) {
	start := time.Now()
	redis := redistest.Start(t)
	v := newVendor(t, 0)
	cfg := writeConfig(t, slowConfig(v.URL, longCallLease.String()))
	owner := startGateway(t, cfg, "redis://"+redis.Addr())
	other := startGateway(t, cfg, "redis://"+redis.Addr())
	lookup := recordReader(t, redis.Addr())
	var f figures

	const tool = "pay.charge"
	key := idempotency.NewKey().String()
	args := map[string]any{"ref": key, "amount": 1500}
	arrived, release := holdFirst(t, v, key)
	answer := make(chan reply, 1)
	go func() { answer <- callTool(context.Background(), owner.base, tool, key, args) }()
	f.calls++
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("the request never reached the vendor")
	}
	heldSince := time.Now()

	// The vendor holds the request for seven leases; the test polls every
	// quarter lease. Holding is the event that drives the test; no assertion
	// depends on how long a poll took.
	hold := 7 * longCallLease
	var first, last, firstRead, lastRead time.Time
	polls, advances, inProgress := 0, 0, 0
	for time.Since(heldSince) < hold {
		r := callTool(context.Background(), other.base, tool, key, args)
		f.calls++
		if !r.refused || r.refusal.Data.Reason != "in_progress" {
			t.Fatalf("poll %d (%v into the hold): %v, want in_progress", polls, time.Since(heldSince).Round(time.Millisecond), r)
		}
		inProgress++
		if ms := retryAfterMS(r); ms <= 0 || ms > 30_000 {
			t.Errorf("poll %d: in_progress retry_after_ms %d, want in (0, 30000]", polls, ms)
		}
		// Lookup reads a lapsed lease as unknown: in_progress here means the
		// lease was live at Redis's own time of the read.
		lastRead = time.Now()
		rec := lookup(tool, key)
		if rec.State != effectspec.InProgress {
			t.Fatalf("poll %d (%v into the hold): record %s, want in_progress (the lease lapsed while the vendor held the call)", polls, time.Since(heldSince).Round(time.Millisecond), rec.State)
		}
		if rec.AttemptCount != 1 {
			t.Errorf("poll %d: attempt_count %d while in flight, want 1", polls, rec.AttemptCount)
		}
		if rec.LeaseDeadline.After(rec.AttemptDeadline) {
			t.Errorf("poll %d: lease deadline %v past the attempt deadline %v", polls, rec.LeaseDeadline, rec.AttemptDeadline)
		}
		switch {
		case first.IsZero():
			first, firstRead = rec.LeaseDeadline, time.Now()
		case rec.LeaseDeadline.Before(last):
			t.Errorf("poll %d: lease deadline moved back from %v to %v", polls, last, rec.LeaseDeadline)
		case rec.LeaseDeadline.After(last):
			advances++
		}
		last = rec.LeaseDeadline
		polls++
		time.Sleep(longCallLease / 4)
	}
	// Every read saw a live lease. The first deadline was at most one lease
	// past its read and the last one was live at its read, seven leases later:
	// the lease was renewed all along, well past where it began.
	if moved, least := last.Sub(first), lastRead.Sub(firstRead)-longCallLease; moved < least {
		t.Errorf("the lease deadline moved %v between reads %v apart", moved, lastRead.Sub(firstRead))
	}
	release()

	r := <-answer
	rc := r.result.Meta.Receipt
	if r.transport != nil || r.refused || rc.Outcome != "accepted" || rc.AttemptCount != 1 || rc.Replayed {
		t.Errorf("the long call answered %v, want accepted with attempt_count 1, not replayed", r)
	}
	// The record and a replay agree, and the vendor saw exactly one request.
	r2 := callTool(context.Background(), other.base, tool, key, args)
	f.calls++
	if rc2 := r2.result.Meta.Receipt; r2.refused || r2.transport != nil || rc2.Outcome != "accepted" || rc2.AttemptCount != 1 || !rc2.Replayed {
		t.Errorf("replay: %v, want accepted replayed with attempt_count 1", r2)
	}
	code, prc, raw := getReceipt(t, other.base, tool, key)
	if code != 200 {
		f.recordsLost++
		t.Fatalf("receipt: %d %s", code, raw)
	}
	seen := v.count(key)
	if seen != 1 {
		t.Errorf("vendor saw %d requests, want 1", seen)
	}
	if seen > prc.AttemptCount {
		f.duplicates++
	}
	if prc.Outcome != "accepted" || prc.AttemptCount != seen {
		f.attemptMismatches++
		t.Errorf("receipt: outcome %s attempt_count %d, vendor saw %d", prc.Outcome, prc.AttemptCount, seen)
	}
	v.integrity(t)
	f.note("lease=%v held=%v polls=%d in_progress=%d lease_advances=%d lease_moved=%v",
		longCallLease, time.Since(heldSince).Round(time.Millisecond), polls, inProgress, advances, last.Sub(first).Round(time.Millisecond))
	f.report(t, start)
}

// TestKill9Takeover kills the gateway with SIGKILL while the vendor holds a
// long call, and retries the same key through another gateway: in_progress
// while the lease the dead gateway last renewed is live, then the state table
// (docs/DESIGN.md, "The record and its lifecycle"): a header-bound tool makes
// attempt 2 with the same vendor key, an unsupported one answers
// outcome_unknown and sends nothing. The slot must be taken over within one
// lease: the contract bound checked is 3 leases from the kill to the first
// answer that is not in_progress, loose enough for a loaded machine.
func TestKill9Takeover(t *testing.T) {
	start := time.Now()
	redis := redistest.Start(t)
	v := newVendor(t, 0)
	cfg := writeConfig(t, slowConfig(v.URL, renewalLease.String()))
	other := startGateway(t, cfg, "redis://"+redis.Addr())
	lookup := recordReader(t, redis.Addr())
	var f figures
	bound := 3 * renewalLease

	for _, b := range []struct{ binding, tool string }{{"header", "pay.charge"}, {"unsupported", "chat.post"}} {
		t.Run(b.binding, func(t *testing.T) {
			victim := startGateway(t, cfg, "redis://"+redis.Addr())
			key := idempotency.NewKey().String()
			args := map[string]any{"ref": key, "amount": 900}
			arrived, release := holdFirst(t, v, key)
			lost := make(chan reply, 1)
			go func() { lost <- callTool(context.Background(), victim.base, b.tool, key, args) }()
			f.calls++
			select {
			case <-arrived:
			case <-time.After(30 * time.Second):
				t.Fatal("the request never reached the vendor")
			}
			// Kill once the lease has been renewed at least once, so the
			// dead gateway leaves a renewed lease behind.
			initial := lookup(b.tool, key).LeaseDeadline
			for {
				rec := lookup(b.tool, key)
				if rec.State != effectspec.InProgress {
					t.Fatalf("record %s before the kill, want in_progress", rec.State)
				}
				if rec.LeaseDeadline.After(initial) {
					break
				}
				time.Sleep(renewalLease / 20)
			}
			victim.kill9(t)
			killedAt := time.Now()
			if r := <-lost; r.transport == nil {
				t.Errorf("the call through the killed gateway answered: %v", r)
			}
			vendorKey := v.sentKey(key)
			seenAtKill := v.count(key)

			// Nobody renews the lease now. An answer that arrived before a
			// lease deadline read in_progress was decided while that lease was
			// live, so it must be in_progress; the takeover comes after.
			var r reply
			var lastLive, at time.Time
			inProgress, whileLive := 0, 0
			for {
				rec := lookup(b.tool, key)
				if rec.State == effectspec.InProgress && rec.LeaseDeadline.After(lastLive) {
					lastLive = rec.LeaseDeadline
				}
				r = callTool(context.Background(), other.base, b.tool, key, args)
				f.calls++
				at = time.Now()
				if !r.refused || r.refusal.Data.Reason != "in_progress" {
					break
				}
				inProgress++
				if ms := retryAfterMS(r); ms <= 0 {
					t.Errorf("in_progress without retry_after_ms (%d)", ms)
				}
				if at.Before(lastLive) {
					whileLive++
				}
				if at.Sub(killedAt) > 10*bound {
					t.Fatalf("still in_progress %v after the kill", at.Sub(killedAt))
				}
				time.Sleep(renewalLease / 10)
			}
			took := at.Sub(killedAt)
			if !at.After(lastLive) {
				t.Errorf("answered %v at %v, before the lease deadline %v the record showed live", r, at, lastLive)
			}
			if took > bound {
				t.Errorf("takeover took %v after the kill, the contract bound is %v (3 leases)", took, bound)
			}
			code, rc, raw := getReceipt(t, other.base, b.tool, key)
			if code != 200 {
				f.recordsLost++
				t.Fatalf("receipt: %d %s", code, raw)
			}
			seen := v.count(key)
			t.Logf("kill -> first non-in_progress answer %v (bound %v), in_progress after kill %d; vendor saw %d at the kill, %d in all; retry %v; receipt attempts=%d outcome=%s vendor_key=%s",
				took.Round(time.Millisecond), bound, inProgress, seenAtKill, seen, r, rc.AttemptCount, rc.Outcome, rc.VendorKey)
			f.note("%s_takeover=%v %s_in_progress=%d(%d_while_lease_live)", b.binding, took.Round(time.Millisecond), b.binding, inProgress, whileLive)

			switch b.binding {
			case "header":
				got := r.result.Meta.Receipt
				if r.refused || r.transport != nil || got.Outcome != "accepted" || got.AttemptCount != 2 || got.Replayed {
					t.Errorf("retry: %v, want accepted with attempt_count 2", r)
				}
				if seen != 2 {
					t.Errorf("vendor saw %d requests, want 2", seen)
				}
				if vendorKey == "" || v.sentKey(key) != vendorKey || rc.VendorKey != vendorKey {
					t.Errorf("vendor key: first attempt %q, second %q, receipt %q: want one key", vendorKey, v.sentKey(key), rc.VendorKey)
				}
				if rc.Outcome != "accepted" || rc.AttemptCount != 2 {
					t.Errorf("receipt: outcome %s attempts %d, want accepted 2", rc.Outcome, rc.AttemptCount)
				}
			case "unsupported":
				if !r.refused || r.refusal.Data.Reason != "outcome_unknown" {
					t.Errorf("retry: %v, want outcome_unknown", r)
				}
				if seen != 1 {
					t.Errorf("vendor saw %d requests, want 1", seen)
				}
				if rc.Outcome != "unknown" || rc.AttemptCount != 1 {
					t.Errorf("receipt: outcome %s attempts %d, want unknown 1", rc.Outcome, rc.AttemptCount)
				}
			}
			if seen > rc.AttemptCount || (b.binding == "unsupported" && seen > 1) {
				f.duplicates++
			}
			if seen != rc.AttemptCount {
				f.attemptMismatches++
			}
			release()
		})
	}
	v.integrity(t)
	f.note("lease=%v bound=%v", renewalLease, bound)
	f.report(t, start)
}

// TestGracefulStopLongCall stops a gateway with SIGTERM while the vendor
// holds a call for five leases (longer than the refserver's shutdown wait
// of lease+5s, within the tool's 30s timeout). A graceful stop must let the
// call finish: the gateway stays up until the vendor answers, the call
// answers accepted with one attempt, and the record is accepted, never left
// in flight to become unknown.
func TestGracefulStopLongCall(t *testing.T) {
	start := time.Now()
	redis := redistest.Start(t)
	v := newVendor(t, 0)
	cfg := writeConfig(t, slowConfig(v.URL, renewalLease.String()))
	g := startGateway(t, cfg, "redis://"+redis.Addr())
	lookup := recordReader(t, redis.Addr())
	var f figures

	const tool = "pay.charge"
	key := idempotency.NewKey().String()
	args := map[string]any{"ref": key, "amount": 300}
	arrived, release := holdFirst(t, v, key)
	answer := make(chan reply, 1)
	go func() { answer <- callTool(context.Background(), g.base, tool, key, args) }()
	f.calls++
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("the request never reached the vendor")
	}
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The vendor answers after five leases, or as soon as the gateway is
	// gone: whichever comes first decides the test, not its timing.
	exitedEarly := false
	select {
	case <-g.done:
		exitedEarly = true
	case <-time.After(5 * renewalLease):
	}
	release()
	if exitedEarly {
		t.Errorf("the gateway exited on SIGTERM while its call was in flight")
	}
	r := <-answer
	if rc := r.result.Meta.Receipt; r.transport != nil || r.refused || rc.Outcome != "accepted" || rc.AttemptCount != 1 {
		t.Errorf("the call answered %v, want accepted with attempt_count 1", r)
	}
	select {
	case <-g.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the gateway did not exit after its call finished")
	}
	rec := lookup(tool, key)
	if rec.State != effectspec.Accepted || rec.AttemptCount != 1 {
		t.Errorf("record %s attempt_count %d, want accepted 1", rec.State, rec.AttemptCount)
	}
	seen := v.count(key)
	if seen != 1 {
		t.Errorf("vendor saw %d requests, want 1", seen)
	}
	if seen > rec.AttemptCount {
		f.duplicates++
	}
	v.integrity(t)
	f.note("lease=%v held=%v exited_early=%v record=%s", renewalLease, 5*renewalLease, exitedEarly, rec.State)
	f.report(t, start)
}
