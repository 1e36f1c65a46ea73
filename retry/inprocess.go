package retry

import (
	"context"
	"time"
)

// SendDeadline is the send deadline the [Orchestrator] set on an attempt's ctx
// ([WithSendDeadline]): a [Target] that runs the attempt in this process (an
// in-process handler) must not start it at or after that time, when the
// slot's lease may have passed to another gateway. ok is false when ctx
// carries none.
func SendDeadline(ctx context.Context) (t time.Time, ok bool) {
	t, ok = ctx.Value(sendDeadlineKey{}).(time.Time)
	return t, ok
}
