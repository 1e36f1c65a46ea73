package proof

import (
	"testing"
	"time"

	"github.com/obol-gateway/obol/proof/internal/faultproxy"
)

// newFaultProxy starts a fault proxy in front of target that the test
// closes when it ends.
func newFaultProxy(t testing.TB, target string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// waitEvent waits up to d for the proxy's next rule hit.
func waitEvent(t testing.TB, p *faultproxy.Proxy, d time.Duration) faultproxy.Event {
	t.Helper()
	select {
	case e := <-p.Events():
		return e
	case <-time.After(d):
		t.Fatalf("fault proxy: no rule hit within %v", d)
		return faultproxy.Event{}
	}
}
