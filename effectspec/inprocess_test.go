package effectspec

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestInProcessBindings: the two in-process bindings parse without a header,
// pointer or status list; only the keyed one deduplicates (a window, the
// production policy allows its writes); both classify by the fixed statuses
// and never reach an HTTP request.
func TestInProcessBindings(t *testing.T) {
	plain, err := Parse([]byte(`{"tool": "notes.create", "effect": "write", "idempotency": {"binding": "in_process"}}`))
	if err != nil {
		t.Fatal(err)
	}
	keyed, err := Parse([]byte(`{"tool": "notes.create", "effect": "write", "idempotency": {"binding": "in_process_keyed", "window": "1h"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if plain.vendorDedup() || plain.VendorWindow() != 0 || plain.Propagation() != PropagationNone {
		t.Errorf("in_process: dedup %v window %v propagation %s", plain.vendorDedup(), plain.VendorWindow(), plain.Propagation())
	}
	if !keyed.vendorDedup() || keyed.VendorWindow() != time.Hour || keyed.Propagation() != PropagationHandler {
		t.Errorf("in_process_keyed: dedup %v window %v propagation %s", keyed.vendorDedup(), keyed.VendorWindow(), keyed.Propagation())
	}
	if !errors.Is((Policy{Environment: Production}).Check(plain), ErrPolicyDenied) || (Policy{Environment: Production}).Check(keyed) != nil || (Policy{Environment: Development}).Check(plain) != nil {
		t.Error("policy: an in_process write is denied in production only; a keyed one passes")
	}
	for _, sp := range []Spec{plain, keyed} {
		if sp.Classify(InProcessAccepted) != Accepted || sp.Classify(InProcessRejected) != DefinitelyRejected ||
			sp.Classify(500) != Unknown || sp.Classify(201) != Unknown || sp.Retryable(InProcessRejected) {
			t.Errorf("%s: classification", sp.Idempotency.Kind)
		}
		if _, _, err := sp.Apply(http.Header{}, []byte(`{}`), "idt_00000000000000000000000000000001"); err == nil {
			t.Errorf("%s: Apply built an HTTP request", sp.Idempotency.Kind)
		}
	}
	for _, bad := range []struct{ spec, field string }{
		{`{"tool": "t", "idempotency": {"binding": "in_process", "window": "1h"}}`, "idempotency.window"},
		{`{"tool": "t", "idempotency": {"binding": "in_process_keyed", "header": "X-Key"}}`, "idempotency.binding"},
		{`{"tool": "t", "route": "federated", "idempotency": {"binding": "in_process"}}`, "idempotency.binding"},
		{`{"tool": "t", "idempotency": {"binding": "in_process"}, "status": {"accepted": [200]}}`, "status"},
	} {
		if _, err := Parse([]byte(bad.spec)); err == nil || !strings.Contains(err.Error(), bad.field+":") {
			t.Errorf("%s: %v, want an error on %s", bad.spec, err, bad.field)
		}
	}
}
