package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/scriptargs"
	"github.com/obol-gateway/obol/internal/storereply"
)

// GiveBack gives back the attempt that the claim with req.ClaimOpID
// reserved and nobody sent, in one script (lua/giveback.lua): a finalize of
// req.Token as never sent, guarded by the claim's op tag and token that
// every reservation of Claim keeps in field K. The record becomes unknown
// with the attempt taken back, keeping its index entry; the next claim
// re-opens the slot if no other attempt may have left. It is not WAITed:
// a give-back lost in a failover leaves the record as after a gateway that
// died before sending (unknown once its lease ends), never dispatched
// twice.
func (s *Store) GiveBack(ctx context.Context, req idempotency.GiveBackRequest) error {
	key, err := req.Scope.StorageKey(s.prefix, req.Key)
	if err != nil {
		return fmt.Errorf("redisstore: give back: %w", err)
	}
	if req.Token < 1 {
		return fmt.Errorf("redisstore: give back: token %d: must be at least 1", req.Token)
	}
	if req.ClaimOpID == "" {
		return errors.New("redisstore: give back: no claim op id")
	}
	cop, err := validOpID(req.ClaimOpID)
	if err != nil {
		return err
	}
	op, err := validOpID(req.OpID)
	if err != nil {
		return err
	}
	inc, err := incarnationArg(req.Incarnation)
	if err != nil {
		return fmt.Errorf("redisstore: give back: %w", err)
	}
	bucket, member, err := s.indexEntry(req.Scope, req.Key, key)
	if err != nil {
		return err
	}
	arr, _, err := s.execKeys(ctx, s.sc.giveback, []string{key, bucket},
		scriptargs.GiveBackSpec.Argv(&scriptargs.GiveBack{Token: req.Token, ClaimOp: opTag('c', cop), Op: opTag('g', op),
			URetention: s.uretention, Member: member, Incarnation: inc}), false)
	if err != nil {
		return opError("giveback", err)
	}
	st, err := status(arr)
	if err != nil {
		return opError("giveback", err)
	}
	switch st {
	case storereply.NotFound:
		return fmt.Errorf("redisstore: give back: %w", idempotency.ErrNotFound)
	case storereply.Stale:
		return fmt.Errorf("redisstore: give back: attempt %d is not the claim's unsent attempt: %w", req.Token, idempotency.ErrStale)
	case storereply.GivenBack:
		return nil
	}
	return opError("giveback", fmt.Errorf("unexpected reply %q", st))
}
