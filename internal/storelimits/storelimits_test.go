package storelimits_test

import (
	"errors"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/storelimits"
)

func TestAttemptTimeout(t *testing.T) {
	for _, c := range []struct {
		in, want time.Duration
		ok       bool
	}{
		{0, effectspec.DefaultAttemptTimeout, true},
		{time.Millisecond, time.Millisecond, true},
		{effectspec.MaxAttemptTimeout, effectspec.MaxAttemptTimeout, true},
		{effectspec.MaxAttemptTimeout + 1, 0, false},
		{-1, 0, false},
		{1 << 62, 0, false},
	} {
		got, err := storelimits.AttemptTimeout(c.in)
		if c.ok != (err == nil) || got != c.want {
			t.Errorf("AttemptTimeout(%v) = %v, %v; want %v, ok %v", c.in, got, err, c.want, c.ok)
		}
		if !c.ok && !errors.Is(err, idempotency.ErrInvalidRequest) {
			t.Errorf("AttemptTimeout(%v): %v, want ErrInvalidRequest", c.in, err)
		}
	}
	if effectspec.DefaultAttemptTimeout != 30*time.Second || effectspec.MaxAttemptTimeout != 15*time.Minute {
		t.Fatal("attempt timeouts differ from DESIGN.md section 7")
	}
}
