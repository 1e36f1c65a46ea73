package redisstore_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/internal/redistest"
	"github.com/obol-gateway/obol/receipt"
)

// backend is a store on one kind of Redis, the client under it and what
// moves its clock by d (and sleeps d: the store's own timers are real).
type backend struct {
	name    string
	store   *redisstore.Store
	client  rueidis.Client
	advance func(d time.Duration)
	cluster *redistest.Cluster
}

// eachBackend runs f on a store with opts on miniredis, a real Redis and a
// 3-master Cluster, each under its own prefix.
func eachBackend(t *testing.T, opts redisstore.Options, f func(t *testing.T, b backend)) {
	t.Run("miniredis", func(t *testing.T) {
		mr := miniredis.RunT(t)
		now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
		mr.SetTime(now)
		c := newClient(t, rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
		o := opts
		o.SkipEvictionCheck = true
		f(t, backend{name: "miniredis", store: newStore(t, c, o), client: c, advance: func(d time.Duration) {
			now = now.Add(d)
			mr.SetTime(now)
			mr.FastForward(d)
			time.Sleep(d) // the store re-reads the scope version by its own clock
		}})
	})
	sleep := func(d time.Duration) { time.Sleep(d) }
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		c := newClient(t, rueidis.ClientOption{InitAddress: []string{srv.Addr()}})
		f(t, backend{name: "redis", store: newStore(t, c, opts), client: c, advance: sleep})
	})
	t.Run("cluster", func(t *testing.T) {
		cl := redistest.StartCluster(t, 3, 0)
		c := newClient(t, rueidis.ClientOption{InitAddress: cl.Addrs()})
		f(t, backend{name: "cluster", store: newStore(t, c, opts), client: c, advance: sleep, cluster: cl})
	})
}

// TestAdvanceScope: the first run marks the version closing and counts;
// within a lease it answers closing; then it refuses while old records
// live unless the caller strands exactly their count; it sets the new
// version and answers advanced again when repeated. A key holding
// something else is a conflict that changes nothing, and on a Cluster a
// migrating slot refuses.
func TestAdvanceScope(t *testing.T) {
	lease := time.Second
	eachBackend(t, redisstore.Options{Prefix: "adv:", Lease: lease}, func(t *testing.T, b backend) {
		ctx := context.Background()
		st := b.store
		from := idempotency.ScopeVersion
		get := func() string {
			v, err := b.client.Do(ctx, b.client.B().Get().Key("adv:meta:scope_version").Build()).ToString()
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		if _, err := st.AdvanceScope(ctx, idempotency.AdvanceRequest{To: from, Strand: -1}); err == nil {
			t.Fatal("an advance to the same version was accepted")
		}
		for i := 0; i < 3; i++ {
			if res, err := st.Claim(ctx, opClaim(idempotency.NewKey())); err != nil || res.Status != idempotency.StatusClaimed {
				t.Fatalf("claim: %+v %v", res, err)
			}
		}
		req := idempotency.AdvanceRequest{To: from + 1, Strand: -1}
		a, err := st.AdvanceScope(ctx, req)
		if err != nil || a.Phase != idempotency.AdvanceClosing || a.Live != 3 || a.RetryAfterMS <= 0 || a.RetryAfterMS > lease.Milliseconds() {
			t.Fatalf("first run: %+v %v", a, err)
		}
		mark := get()
		if !strings.HasPrefix(mark, strconv.Itoa(from)+" closing ") {
			t.Fatalf("closing mark %q", mark)
		}
		// The store stops claiming at its next reading (within a lease).
		b.advance(lease + 100*time.Millisecond)
		if _, err := st.Claim(ctx, opClaim(idempotency.NewKey())); !strings.Contains(errText(err), "scope version") {
			t.Fatalf("claim after the closing mark: %v", err)
		}
		if a, err := st.AdvanceScope(ctx, req); err != nil || a.Phase != idempotency.AdvanceRecordsLive || a.Live != 3 || get() != mark {
			t.Fatalf("records live: %+v %v, key %q", a, err, get())
		}
		if b.cluster != nil {
			// A slot marked migrating on its master: nothing is counted.
			m := b.cluster.Master(0)
			other, _ := b.cluster.Master(1).Do("CLUSTER", "MYID")
			slot := firstSlot(t, m)
			if _, err := m.Do("CLUSTER", "SETSLOT", slot, "MIGRATING", other.(string)); err != nil {
				t.Fatal(err)
			}
			a, err := st.AdvanceScope(ctx, req)
			// STABLE clears the mark; NODE to itself does not clear a
			// migrating slot on Redis 7.
			if _, err2 := m.Do("CLUSTER", "SETSLOT", slot, "STABLE"); err2 != nil {
				t.Fatal(err2)
			}
			if err != nil || a.Phase != idempotency.AdvanceMigrating || get() != mark {
				t.Fatalf("migrating: %+v %v", a, err)
			}
		}
		strand := req
		strand.Strand = 2
		if a, err := st.AdvanceScope(ctx, strand); err != nil || a.Phase != idempotency.AdvanceRecordsLive || get() != mark {
			t.Fatalf("strand another count: %+v %v", a, err)
		}
		strand.Strand = 3
		if a, err := st.AdvanceScope(ctx, strand); err != nil || a.Phase != idempotency.AdvanceDone || a.Live != 3 {
			t.Fatalf("strand the count: %+v %v", a, err)
		}
		if v := get(); v != strconv.Itoa(from+1) {
			t.Fatalf("key %q after the advance", v)
		}
		if a, err := st.AdvanceScope(ctx, req); err != nil || a.Phase != idempotency.AdvanceDone {
			t.Fatalf("repeated: %+v %v", a, err)
		}
		if err := b.client.Do(ctx, b.client.B().Set().Key("adv:meta:scope_version").Value("7").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		if a, err := st.AdvanceScope(ctx, req); err != nil || a.Phase != idempotency.AdvanceConflict || a.Fleet != "7" || get() != "7" {
			t.Fatalf("conflict: %+v %v", a, err)
		}
	})
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// firstSlot is the first slot master m serves.
func firstSlot(t *testing.T, m *redistest.Server) string {
	t.Helper()
	v, err := m.Do("CLUSTER", "NODES")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(v.(string), "\n") {
		f := strings.Fields(line)
		if len(f) > 8 && strings.Contains(f[2], "myself") {
			first, _, _ := strings.Cut(f[8], "-")
			return first
		}
	}
	t.Fatalf("no slots in %q", v)
	return ""
}

// opClaim is a claim of key k by an operator test's one tool.
func opClaim(k idempotency.Key) idempotency.ClaimRequest {
	h := "sha256:" + strings.Repeat("ab", 32)
	return idempotency.ClaimRequest{
		Scope: idempotency.Scope{Workspace: "ws_acme", Connection: "conn_stripe", Tool: "stripe.create_charge"}, Key: k,
		KeySource: idempotency.KeySupplied, RequestHash: h, Binding: effectspec.BindingHeader,
		Route: receipt.RouteRecord{Connection: "conn_stripe", Provider: "stripe", Tool: "stripe.create_charge",
			Method: "POST", Host: "api.stripe.com", Path: "/v1/charges", Fingerprint: h},
	}
}
