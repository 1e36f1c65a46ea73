package idempotency_test

import (
	"errors"
	"testing"

	"github.com/obol-gateway/obol/idempotency"
)

// A refused claim is an error of its own, which Reason leaves to the
// caller's refusal.
func TestRefusedErr(t *testing.T) {
	err := idempotency.ClaimResult{Status: idempotency.StatusRefused}.Err()
	if !errors.Is(err, idempotency.ErrRefused) {
		t.Fatalf("Err() = %v, want ErrRefused", err)
	}
	if r, code := idempotency.Reason(err); r != "" || code != 0 {
		t.Fatalf("Reason(ErrRefused) = %q, %d; want none", r, code)
	}
}
