package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/scriptargs"
	"github.com/obol-gateway/obol/internal/storereply"
)

// Finalize records the outcome of attempt Token in one script and returns
// the record without the body.
//
// It is fenced by the token alone: an in-flight record whose lease expired,
// but that no claim took over, accepts its own attempt's outcome, and so
// does one that a claim marked unknown on the expiry path (an unsupported
// binding) without taking a new token. Once a claim has taken over with the
// next attempt, the old token is stale.
//
// With NeverSent the Outcome must be unknown or empty, with no Result: the
// record is stored as unknown with a field s (the attempts that may have
// left) below n, and Lookup reports [effectspec.Unknown] with SentAttempts. On a
// record the expiry path already marked unknown it records unknown without
// taking the attempt back.
func (s *Store) Finalize(ctx context.Context, req idempotency.FinalizeRequest) (idempotency.Record, error) {
	c, args, err := s.finalizePrep(req)
	if err != nil {
		return idempotency.Record{}, err
	}
	key, bucket := c.key, c.bucket
	arr, _, st, err := s.runStatus(ctx, "finalize", s.sc.finalize, []string{key, bucket}, args, false)
	if err != nil {
		return idempotency.Record{}, err
	}
	switch st {
	case storereply.NotFound:
		return idempotency.Record{}, fmt.Errorf("redisstore: finalize: %w", idempotency.ErrNotFound)
	case storereply.Stale:
		return idempotency.Record{}, fmt.Errorf("redisstore: finalize: token %d is not the in-flight attempt: %w", req.Token, idempotency.ErrStale)
	case storereply.Finalized:
		rec, err := storedRecord("finalize", req.Scope, req.Key, arr)
		if err == nil && !applied(arr, 2) {
			head, _ := arr[1].ToString()
			s.accountFinal(req, c, rec, head)
		}
		return rec, err
	}
	return idempotency.Record{}, opError("finalize", fmt.Errorf("unexpected reply %q", st))
}

// finalizeCall is what a finalize computes before its script.
type finalizeCall struct {
	key, bucket, member string
	ttl                 string
	result              []string
}

// finalizePrep checks a finalize and builds its script's arguments.
func (s *Store) finalizePrep(req idempotency.FinalizeRequest) (finalizeCall, []string, error) {
	key, ss, err := s.storageKey(req.Scope, req.Key)
	if err != nil {
		return finalizeCall{}, nil, fmt.Errorf("redisstore: finalize: %w", err)
	}
	if req.Token < 1 {
		return finalizeCall{}, nil, fmt.Errorf("redisstore: finalize: token %d: must be at least 1", req.Token)
	}
	if req.NeverSent {
		if req.Outcome != "" && req.Outcome != effectspec.Unknown || req.Result != nil {
			return finalizeCall{}, nil, errors.New("redisstore: finalize: an attempt never sent has outcome unknown and no result")
		}
		req.Outcome = effectspec.Unknown
	}
	switch req.Outcome {
	case effectspec.Accepted, effectspec.DefinitelyRejected, effectspec.Unknown:
	default:
		return finalizeCall{}, nil, fmt.Errorf("redisstore: finalize: outcome %q: want accepted, definitely_rejected or unknown", req.Outcome)
	}
	if req.Result != nil && (req.Result.Status < 0 || req.Result.Status > 999) {
		return finalizeCall{}, nil, fmt.Errorf("redisstore: finalize: status %d out of range", req.Result.Status)
	}
	op, err := validOpID(req.OpID)
	if err != nil {
		return finalizeCall{}, nil, err
	}
	inc, err := incarnationArg(req.Incarnation)
	if err != nil {
		return finalizeCall{}, nil, fmt.Errorf("redisstore: finalize: %w", err)
	}
	ttl := s.retention
	if req.Outcome == effectspec.Unknown {
		ttl = s.uretention
	}
	slot := keySlot(key)
	bucket, member := ss.bucket(slot), ss.member(req.Key)
	// A final outcome leaves the unknown index in the finalize script.
	result := encodeResult(req.Result, s.maxResult)
	args := scriptargs.FinalizeSpec.Argv(&scriptargs.Finalize{Token: req.Token, State: stateCodes[req.Outcome], Op: opTag('f', op),
		TTL: ttl, Never: req.NeverSent, Member: member, Incarnation: inc, Result: result})
	return finalizeCall{key: key, bucket: bucket, member: member, ttl: ttl, result: result}, args, nil
}
