package idempotency_test

import (
	"errors"
	"fmt"

	"github.com/obol-gateway/obol/idempotency"
)

func ExampleParseKey() {
	k, err := idempotency.ParseKey(`"idt_5c1f0a9e2b7d4c3e8f6a1b2c3d4e5f60"`) // Structured Field string form
	fmt.Println(k, err)

	_, err = idempotency.ParseKey("idt_not-a-key")
	fmt.Println(errors.Is(err, idempotency.ErrMalformedKey))
	// Output:
	// idt_5c1f0a9e2b7d4c3e8f6a1b2c3d4e5f60 <nil>
	// true
}

func ExampleScope_StorageKey() {
	k, _ := idempotency.ParseKey("idt_5c1f0a9e2b7d4c3e8f6a1b2c3d4e5f60")
	native := idempotency.Scope{Workspace: "ws_acme", Connection: "conn_stripe", Tool: "stripe.create_charge"}
	capability := idempotency.Scope{Workspace: "ws_acme", Tool: "cap.send_email"}
	for _, s := range []idempotency.Scope{native, capability} {
		key, err := s.StorageKey(idempotency.DefaultPrefix, k)
		fmt.Println(key, err)
	}
	_, err := idempotency.Scope{Workspace: "ws:acme", Connection: "c", Tool: "t"}.StorageKey("obol:", k)
	fmt.Println(err)
	// Output:
	// obol:idem:ws_acme:conn_stripe:b4726a67ab39950b:idt_5c1f0a9e2b7d4c3e8f6a1b2c3d4e5f60 <nil>
	// obol:idem:ws_acme:unresolved:c0a95ba59e1e6193:idt_5c1f0a9e2b7d4c3e8f6a1b2c3d4e5f60 <nil>
	// idempotency: invalid scope: workspace: byte 2 is not in [A-Za-z0-9_.-]
}

// Reason is the one mapping from the lifecycle's errors to the wire.
func ExampleReason() {
	for _, err := range []error{
		idempotency.ErrRequestMismatch,
		fmt.Errorf("redisstore: finalize: %w", idempotency.ErrStale),
		idempotency.ErrInvalidJSON,
		errors.New("not a refusal"),
	} {
		reason, status := idempotency.Reason(err)
		fmt.Printf("%q %d\n", reason, status)
	}
	// Output:
	// "request_mismatch" 422
	// "lease_lost" 409
	// "invalid_arguments" 400
	// "" 0
}
