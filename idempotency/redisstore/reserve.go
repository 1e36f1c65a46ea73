package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/scriptargs"
	"github.com/obol-gateway/obol/internal/storelimits"
	"github.com/obol-gateway/obol/internal/storereply"
)

// Reserve reserves attempt Token+1, the one immediate second attempt of a
// cycle, in one script (WAITed as a claim, see [Options.WaitReplicas]). It
// extends the work, so it needs a live lease.
func (s *Store) Reserve(ctx context.Context, req idempotency.ReserveRequest) (idempotency.Reservation, error) {
	key, err := req.Scope.StorageKey(s.prefix, req.Key)
	if err != nil {
		return idempotency.Reservation{}, fmt.Errorf("redisstore: reserve: %w", err)
	}
	if req.Token < 1 {
		return idempotency.Reservation{}, fmt.Errorf("redisstore: reserve: token %d: must be at least 1", req.Token)
	}
	timeout, err := storelimits.AttemptTimeout(req.Timeout)
	if err != nil {
		return idempotency.Reservation{}, fmt.Errorf("redisstore: reserve: %w", err)
	}
	if err := s.checkRetention(timeout); err != nil {
		return idempotency.Reservation{}, fmt.Errorf("redisstore: reserve: %w", err)
	}
	inc, err := incarnationArg(req.Incarnation)
	if err != nil {
		return idempotency.Reservation{}, fmt.Errorf("redisstore: reserve: %w", err)
	}
	maxAtt, err := storelimits.MaxAttempts(req.MaxAttempts)
	if err != nil {
		return idempotency.Reservation{}, fmt.Errorf("redisstore: reserve: %w", err)
	}
	op, bucket, member, err := s.opEntry(req.OpID, req.Scope, req.Key, key)
	if err != nil {
		return idempotency.Reservation{}, err
	}
	slot := keySlot(key)
	epoch, gen := s.genArg(slot)
	args := scriptargs.ReserveSpec.Argv(&scriptargs.Reserve{Token: req.Token, Op: opTag('r', op), Lease: s.lease, URetention: s.uretention,
		Timeout: int(timeout.Milliseconds()), PrevNever: req.PreviousNeverSent, Member: member, Incarnation: inc, MaxAttempts: maxAtt,
		Gen: gen})
	arr, acks, err := s.execKeys(ctx, s.sc.reserve, []string{key, bucket, s.genKeyOf(slot)}, args, true)
	if err == nil {
		if arr, err = s.genReply(ctx, slot, gen, epoch, arr); errors.Is(err, idempotency.ErrStoreDataLost) {
			return idempotency.Reservation{}, fmt.Errorf("redisstore: reserve: %w", err)
		}
	}
	var st idempotency.Status
	if err == nil {
		st, err = status(arr)
	}
	if err != nil {
		return idempotency.Reservation{}, opError("reserve", err)
	}
	switch st {
	case storereply.NotFound:
		return idempotency.Reservation{}, fmt.Errorf("redisstore: reserve: %w", idempotency.ErrNotFound)
	case storereply.Stale:
		return idempotency.Reservation{}, fmt.Errorf("redisstore: reserve: token %d is not the in-flight attempt: %w", req.Token, idempotency.ErrStale)
	case storereply.LeaseExpired:
		return idempotency.Reservation{}, fmt.Errorf("redisstore: reserve: the lease of attempt %d has expired: %w", req.Token, idempotency.ErrStale)
	case storereply.CycleExhausted:
		return idempotency.Reservation{}, fmt.Errorf("redisstore: reserve: this cycle already had two attempts: %w", idempotency.ErrStale)
	case storereply.MaxAttempts:
		return idempotency.Reservation{}, fmt.Errorf("redisstore: reserve: the slot's attempts reached max_attempts %d: %w", maxAtt, idempotency.ErrStale)
	case storereply.Reserved:
		if len(arr) <= reservedDeadline {
			return idempotency.Reservation{}, opError("reserve", errors.New("short reserve reply"))
		}
		n, err1 := arr[reservedToken].AsInt64()
		l, err2 := arr[reservedLease].AsInt64()
		e, err3 := deadline(arr[reservedDeadline])
		if err := errors.Join(err1, err2, err3); err != nil {
			return idempotency.Reservation{}, opError("reserve", err)
		}
		if err := s.checkAcks(acks); err != nil {
			s.neverSent(ctx, key, bucket, member, int(n), inc)
			return idempotency.Reservation{}, opError("reserve", err)
		}
		return idempotency.Reservation{Token: int(n), LeaseDeadline: msTime(l), AttemptDeadline: e, AlreadyApplied: applied(arr, reservedApplied)}, nil
	}
	return idempotency.Reservation{}, opError("reserve", fmt.Errorf("unexpected reply %q", st))
}
