package proof

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/internal/redistest"
)

// TestClusterFailover runs the library on a Redis Cluster of 3 masters and
// 3 replicas with WaitReplicas=1 (WAIT 1 behind every reservation), kills a
// master with SIGKILL while calls are in flight under load, and checks after
// the failover that every key the vendor saw, and every acknowledged
// reservation, still has its record, with attempt_count at least the
// vendor's count.
func TestClusterFailover(t *testing.T) {
	start := time.Now()
	cl := redistest.StartCluster(t, 3, 1)
	v := newVendor(t, 2*time.Millisecond)
	h := newLibHarness(t, newStore(t, newClient(t, cl.Addrs()...), redisstore.Options{Lease: libLease, WaitReplicas: 1, WaitTimeout: libLease / 4}), v)
	h.finalizeMayRollBack = true
	stop := h.startLoad()
	defer stop()
	// The held calls' reservations were acknowledged (WAIT 1 included)
	// before the kill; they finalize after it.
	const inFlight = 4
	held, release := h.hold(t, inFlight)
	defer release()
	cl.Master(0).Kill()
	ackedBeforeKill := len(h.store.acked())
	release()
	// cluster-node-timeout is 1s: the replica takes over within a few. Until
	// the old master is back as its replica, the new master has none, so
	// WAIT 1 fails and its reservations fail closed.
	waitFor(t, "the killed master's replica takes over", func() bool {
		info, err := cl.Replica(0, 0).Do("INFO", "replication")
		s, _ := info.(string)
		return err == nil && strings.Contains(s, "role:master")
	})
	cl.Master(0).Restart()
	cl.WaitOK(t)
	waitFor(t, "a call completes after the failover", h.completes)
	stop()
	var f figures
	failed := h.audit(t, &f)
	if ackedBeforeKill < inFlight {
		t.Errorf("%d reservations acknowledged before the kill, with %d calls in flight", ackedBeforeKill, inFlight)
	}
	f.note("acknowledged_before_kill=%d in_flight_at_kill=%d", ackedBeforeKill, len(held))

	// The cluster serves again: fresh calls complete, and every failed key
	// completes after its lease without a second effect. A fresh call may
	// still fail closed (a WAIT that timed out on a busy machine), as the
	// contract allows at any time: it is counted and completed with the
	// failed keys.
	const fresh = 50
	failedClosed := 0
	for range fresh {
		k := idempotency.NewKey()
		r := h.call(context.Background(), k)
		f.calls++
		switch {
		case errors.Is(r.err, idempotency.ErrStoreUnavailable):
			failedClosed++
			failed = append(failed, k)
		case r.err != nil || r.out.Receipt.Outcome != "accepted" || v.count(k.String()) != 1:
			t.Errorf("after the failover: %v, receipt %+v", r.err, r.out.Receipt)
		}
	}
	if failedClosed == fresh {
		t.Errorf("after the failover, every one of %d fresh calls failed closed", fresh)
	}
	f.note("after_failover_failed_closed=%d", failedClosed)
	h.recover(t, &f, failed)
	v.integrity(t)
	f.report(t, start)
}
