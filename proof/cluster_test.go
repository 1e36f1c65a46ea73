package proof

import (
	"context"
	"testing"
	"time"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/internal/redistest"
)

// TestClusterFailover runs the library on a Redis Cluster of 3 masters and
// 3 replicas with WaitReplicas=1 (WAIT 1 behind every reservation), kills a
// master with SIGKILL under load, and checks after the failover that every
// key the vendor saw, and every acknowledged reservation, still has its
// record, with attempt_count at least the vendor's count.
func TestClusterFailover(t *testing.T) {
	start := time.Now()
	cl := redistest.StartCluster(t, 3, 1)
	v := newVendor(t, 2*time.Millisecond)
	h := newLibHarness(t, newStore(t, newClient(t, cl.Addrs()...), redisstore.Options{Lease: libLease, WaitReplicas: 1, WaitTimeout: libLease / 4}), v)
	h.finalizeMayRollBack = true
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { h.load(8, stop); close(done) }()
	time.Sleep(800 * time.Millisecond)
	cl.Master(0).Kill()
	ackedBeforeKill := len(h.store.acked())
	// cluster-node-timeout is 1s: the replica takes over within a few. Until
	// the old master is back as its replica, the new master has none, so
	// WAIT 1 fails and its reservations fail closed (ErrReplicas).
	time.Sleep(3 * time.Second)
	cl.Master(0).Restart()
	cl.WaitOK(t)
	time.Sleep(500 * time.Millisecond)
	close(stop)
	<-done
	var f figures
	failed := h.audit(t, &f)
	if ackedBeforeKill == 0 {
		t.Errorf("no reservation was acknowledged before the kill")
	}
	f.note("acknowledged_before_kill=%d", ackedBeforeKill)

	// The cluster serves again: fresh calls complete, and every failed key
	// completes after its lease without a second effect.
	for range 50 {
		k := idempotency.NewKey()
		r := h.call(context.Background(), k)
		f.calls++
		if r.err != nil || r.out.Receipt.Outcome != "accepted" || v.count(k.String()) != 1 {
			t.Errorf("after the failover: %v, receipt %+v", r.err, r.out.Receipt)
		}
	}
	h.recover(t, &f, failed)
	v.integrity(t)
	f.report(t, start)
}
