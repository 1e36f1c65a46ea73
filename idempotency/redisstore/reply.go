package redisstore

import (
	"errors"
	"fmt"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/storereply"
)

// statusDataLost is gen_wrap's answer (lua/common.lua) when the slot's
// generation sentinel shows lost writes: the body did not run.
const statusDataLost idempotency.Status = "data_lost"

// statuses is the one table from the words the scripts answer with to
// [idempotency.Status]: every reply's first element, and a claim's
// outcome_unknown limit, decodes through it.
var statuses = func() map[string]idempotency.Status {
	m := make(map[string]idempotency.Status)
	for _, s := range []idempotency.Status{
		idempotency.StatusClaimed, idempotency.StatusHeld, idempotency.StatusReplay,
		idempotency.StatusRequestMismatch, idempotency.StatusDestinationConflict, idempotency.StatusInProgress,
		idempotency.StatusDenied, idempotency.StatusOutcomeUnknown, idempotency.StatusScopeVersionConflict,
		idempotency.StatusRefused, idempotency.StatusNoRecord, storereply.MaxAttempts, storereply.Backoff,
		storereply.Reserved, storereply.Renewed, storereply.Finalized, storereply.GivenBack,
		storereply.Settled, storereply.Approved, storereply.Conflict, storereply.Found,
		storereply.NotFound, storereply.NotUnknown, storereply.Stale,
		storereply.CycleExhausted, storereply.LeaseExpired, statusDataLost,
	} {
		m[string(s)] = s
	}
	return m
}()

// The positions of the fields of the replies that more than one place
// reads: claimed and reserved (lua/common.lua's CLAIMED and RESERVED, less
// one: Lua counts from 1; TestReplyLayout checks they agree).
const (
	claimedToken       = 1
	claimedLease       = 2
	claimedApplied     = 3
	claimedVendorKey   = 4
	claimedDeadline    = 5
	claimedIncarnation = 6
	claimedMoved       = 7

	reservedToken    = 1
	reservedLease    = 2
	reservedDeadline = 3
	reservedApplied  = 4
)

// status is the status word of a script's reply, decoded by [statuses]: a
// word no script answers is an error.
func status(arr []rueidis.RedisMessage) (idempotency.Status, error) {
	if len(arr) == 0 {
		return "", errors.New("empty script reply")
	}
	return statusAt(arr, 0)
}

// statusAt decodes element i of a reply as a status word.
func statusAt(arr []rueidis.RedisMessage, i int) (idempotency.Status, error) {
	w, err := arr[i].ToString()
	if err != nil {
		return "", err
	}
	st, ok := statuses[w]
	if !ok {
		return "", fmt.Errorf("unexpected reply %q", w)
	}
	return st, nil
}
