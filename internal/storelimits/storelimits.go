// Package storelimits reads the limits of a store request as the stores
// apply them: a zero field means its default ([effectspec.DefaultAttemptTimeout],
// [effectspec.DefaultMaxAttempts], [effectspec.DefaultVendorWindow],
// [idempotency.MaxPageSize]), a negative one is
// [idempotency.ErrInvalidRequest] (docs/DESIGN.md, "The record and its
// lifecycle"). redisstore and the model stores of the tests share it.
package storelimits

import (
	"fmt"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

// VendorWindow returns the vendor window a claim asks for
// ([idempotency.ClaimRequest].VendorWindow): d, or
// [effectspec.DefaultVendorWindow] when d is zero.
func VendorWindow(d time.Duration) (time.Duration, error) {
	switch {
	case d == 0:
		return effectspec.DefaultVendorWindow, nil
	case d < 0:
		return 0, fmt.Errorf("%w: negative vendor window", idempotency.ErrInvalidRequest)
	}
	return d, nil
}

// MaxAttempts returns the max_attempts a request asks for: n, or
// [effectspec.DefaultMaxAttempts] when n is zero.
func MaxAttempts(n int) (int, error) {
	switch {
	case n == 0:
		return effectspec.DefaultMaxAttempts, nil
	case n < 0:
		return 0, fmt.Errorf("%w: negative max_attempts", idempotency.ErrInvalidRequest)
	}
	return n, nil
}

// AttemptTimeout returns the attempt timeout a request asks for: d, or
// [effectspec.DefaultAttemptTimeout] when d is zero. One over
// [effectspec.MaxAttemptTimeout] is refused too.
func AttemptTimeout(d time.Duration) (time.Duration, error) {
	switch {
	case d == 0:
		return effectspec.DefaultAttemptTimeout, nil
	case d < 0 || d > effectspec.MaxAttemptTimeout:
		return 0, fmt.Errorf("%w: attempt timeout %v out of range", idempotency.ErrInvalidRequest, d)
	}
	return d, nil
}

// PageLimit returns the page size a listing asks for
// ([idempotency.ListRequest].Limit), bounded by [idempotency.MaxPageSize].
func PageLimit(limit int) int {
	if limit <= 0 || limit > idempotency.MaxPageSize {
		return idempotency.MaxPageSize
	}
	return limit
}
