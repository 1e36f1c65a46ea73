package retry

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/obol-gateway/obol/idempotency"
)

// renewStore counts renewals; each one waits for release when block is set,
// and answers err.
type renewStore struct {
	idempotency.Store
	lease    time.Duration
	block    bool
	err      error
	entered  chan struct{}
	release  chan struct{}
	renewals atomic.Int32
}

func (s *renewStore) Lease() time.Duration { return s.lease }

func (s *renewStore) Renew(context.Context, idempotency.RenewRequest) (time.Time, error) {
	s.renewals.Add(1)
	if s.block {
		s.entered <- struct{}{}
		<-s.release
	}
	return time.Now().Add(s.lease), s.err
}

// stop must not return while a renewal runs, and no renewal starts after it.
func TestRenewStopWaitsForARunningRenewal(t *testing.T) {
	st := &renewStore{lease: 30 * time.Millisecond, block: true, entered: make(chan struct{}, 1), release: make(chan struct{})}
	o := &Orchestrator{Store: st}
	stop := o.renew(context.Background(), &Call{}, 1, "", st.lease)
	<-st.entered
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("stop returned while a renewal was running")
	case <-time.After(50 * time.Millisecond):
	}
	close(st.release)
	<-stopped
	time.Sleep(3 * st.lease)
	if n := st.renewals.Load(); n != 1 {
		t.Fatalf("%d renewals, want the one that ran before stop", n)
	}
}

// Renewals repeat every lease/3 until stop, and end at ErrStale.
func TestRenewRepeatsUntilStale(t *testing.T) {
	st := &renewStore{lease: 30 * time.Millisecond}
	o := &Orchestrator{Store: st}
	stop := o.renew(context.Background(), &Call{}, 1, "", st.lease)
	deadline := time.Now().Add(10 * time.Second)
	for st.renewals.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d renewals in 10s", st.renewals.Load())
		}
		time.Sleep(time.Millisecond)
	}
	stop()

	stale := &renewStore{lease: 30 * time.Millisecond, err: idempotency.ErrStale}
	o = &Orchestrator{Store: stale}
	stop = o.renew(context.Background(), &Call{}, 1, "", stale.lease)
	for stale.renewals.Load() < 1 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(5 * stale.lease)
	stop()
	if n := stale.renewals.Load(); n != 1 {
		t.Fatalf("%d renewals after ErrStale, want 1", n)
	}
}
