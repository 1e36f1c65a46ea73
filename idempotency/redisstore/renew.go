package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/scriptargs"
	"github.com/obol-gateway/obol/internal/storereply"
)

// Renew extends the lease of attempt Token, up to its attempt deadline, in
// one script; it never shortens a lease, and needs a live one. It keeps its
// op id in a field of its own, so renewals never hide a re-sent claim or
// reserve from its op id. It is not WAITed: a renewal lost in a failover
// only shortens the lease.
func (s *Store) Renew(ctx context.Context, req idempotency.RenewRequest) (time.Time, error) {
	key, err := req.Scope.StorageKey(s.prefix, req.Key)
	if err != nil {
		return time.Time{}, fmt.Errorf("redisstore: renew: %w", err)
	}
	if req.Token < 1 {
		return time.Time{}, fmt.Errorf("redisstore: renew: token %d: must be at least 1", req.Token)
	}
	op, err := validOpID(req.OpID)
	if err != nil {
		return time.Time{}, err
	}
	inc, err := incarnationArg(req.Incarnation)
	if err != nil {
		return time.Time{}, fmt.Errorf("redisstore: renew: %w", err)
	}
	arr, _, err := s.exec(ctx, s.sc.renew, key, scriptargs.RenewSpec.Argv(&scriptargs.Renew{Token: req.Token, Op: opTag('l', op), Lease: s.lease, Incarnation: inc}), false)
	if err != nil {
		return time.Time{}, opError("renew", err)
	}
	st, err := status(arr)
	if err != nil {
		return time.Time{}, opError("renew", err)
	}
	switch st {
	case storereply.NotFound:
		return time.Time{}, fmt.Errorf("redisstore: renew: %w", idempotency.ErrNotFound)
	case storereply.Stale:
		return time.Time{}, fmt.Errorf("redisstore: renew: token %d is not the in-flight attempt: %w", req.Token, idempotency.ErrStale)
	case storereply.LeaseExpired:
		return time.Time{}, fmt.Errorf("redisstore: renew: the lease of attempt %d has lapsed: %w", req.Token, idempotency.ErrStale)
	case storereply.Renewed:
		if len(arr) < 2 {
			return time.Time{}, opError("renew", errors.New("short renew reply"))
		}
		l, err := arr[1].AsInt64()
		if err != nil {
			return time.Time{}, opError("renew", err)
		}
		return msTime(l), nil
	}
	return time.Time{}, opError("renew", fmt.Errorf("unexpected reply %q", st))
}
