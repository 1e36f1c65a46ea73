package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/scriptargs"
	"github.com/obol-gateway/obol/internal/storelimits"
	"github.com/obol-gateway/obol/internal/storereply"
)

// Claim applies the state table of docs/DESIGN.md, "The record and its
// lifecycle" in one script: one round trip (a replay costs only this), plus a
// GET of the fleet's scope version at most once per lease (scope.go) and a SET
// of the ticket when it answers held. req.KeySource must be KeySupplied or
// KeyMinted.
func (s *Store) Claim(ctx context.Context, req idempotency.ClaimRequest) (idempotency.ClaimResult, error) {
	// The reading first: an acknowledgement it adopts resets the
	// generations the claim sends (generation.go).
	if err := s.scope.check(ctx); err != nil {
		return idempotency.ClaimResult{}, err
	}
	c, args, err := s.claimPrep(req)
	if err != nil {
		return idempotency.ClaimResult{}, err
	}
	key, bucket, member, rh := c.key, c.bucket, c.member, c.rh
	// The claim script writes the index entry of a reservation itself, in
	// the record's slot: it is in place before the caller may send
	// (docs/DESIGN.md, "The record and its lifecycle").
	keys := []string{key, bucket, c.pending, s.genKeyOf(c.slot)}
	arr, acks, err := s.execOnce(ctx, s.sc.claim, keys, args, true)
	if notRun(err) {
		// A migrating slot: a final record replays without its bucket
		// (replayOf); anything else waits for the slot to settle.
		if res, ok := s.replayOf(ctx, req, rh); ok {
			return res, nil
		}
		arr, acks, err = s.resend(ctx, s.sc.claim, keys, args, true, err)
	}
	if err != nil {
		return idempotency.ClaimResult{}, opError("claim", err)
	}
	if arr, err = s.genReply(ctx, c.slot, c.gen, c.epoch, arr); errors.Is(err, idempotency.ErrStoreDataLost) {
		return idempotency.ClaimResult{}, err
	} else if err != nil {
		return idempotency.ClaimResult{}, opError("claim", err)
	}
	res, err := parseClaim(req.Scope, req.Key, arr)
	if err != nil {
		return idempotency.ClaimResult{}, opError("claim", err)
	}
	// Counted as soon as written, whatever follows (a WAIT that fell
	// short, a ticket not written).
	s.accountClaim(req, res, arr, c)
	switch res.Status {
	case idempotency.StatusClaimed:
		if err := s.checkAcks(acks); err != nil {
			inc, _ := incarnationArg(res.Incarnation)
			s.neverSent(ctx, key, bucket, member, res.Token, inc)
			return idempotency.ClaimResult{}, opError("claim", err)
		}
	case idempotency.StatusHeld:
		// The ticket key lives in its own slot, so it is a second command.
		// Every held answer rewrites it: a crash between the two leaves a
		// held record whose next claim restores the ticket.
		if err := s.writeTicket(ctx, res.Ticket, req.Scope, req.Key, key); err != nil {
			return idempotency.ClaimResult{}, opError("claim", err)
		}
	}
	return res, nil
}

// claimCall is what a claim computes before its script: the keys and the
// facts that Claim counts and reports with the reply.
type claimCall struct {
	key, bucket, pending, member, route, vk, fresh, rh string
	slot, gen                                          int
	epoch                                              int64 // of the generations, when gen was read
}

// claimPrep checks a claim and builds its script's arguments: all the
// work of Claim that needs no round trip.
func (s *Store) claimPrep(req idempotency.ClaimRequest) (claimCall, []string, error) {
	key, ss, err := s.storageKey(req.Scope, req.Key)
	if err != nil {
		return claimCall{}, nil, fmt.Errorf("redisstore: claim: %w", err)
	}
	rh, err := digestOf("request hash", req.RequestHash)
	if err != nil {
		return claimCall{}, nil, err
	}
	fp, err := digestOf("fingerprint", req.Route.Fingerprint)
	if err != nil {
		return claimCall{}, nil, err
	}
	b, ok := bindingCode(req.Binding)
	if !ok {
		return claimCall{}, nil, fmt.Errorf("redisstore: claim: unknown binding %q", req.Binding)
	}
	var ks string
	switch req.KeySource {
	case idempotency.KeySupplied:
		ks = "s"
	case idempotency.KeyMinted:
		ks = "m"
	default:
		return claimCall{}, nil, fmt.Errorf("redisstore: claim: key source %q: want %q or %q", req.KeySource, idempotency.KeySupplied, idempotency.KeyMinted)
	}
	route, err := packRoute(req.Scope, req.Route)
	if err != nil {
		return claimCall{}, nil, err
	}
	timeout, err := storelimits.AttemptTimeout(req.Timeout)
	if err != nil {
		return claimCall{}, nil, fmt.Errorf("redisstore: claim: %w", err)
	}
	window, err := storelimits.VendorWindow(req.VendorWindow)
	if err != nil {
		return claimCall{}, nil, fmt.Errorf("redisstore: claim: vendor window: %w", err)
	}
	maxAtt, err := storelimits.MaxAttempts(req.MaxAttempts)
	if err != nil {
		return claimCall{}, nil, fmt.Errorf("redisstore: claim: %w", err)
	}
	if err := s.checkRetention(timeout); err != nil {
		return claimCall{}, nil, fmt.Errorf("redisstore: claim: %w", err)
	}
	if req.Ticket != "" && !idempotency.ValidTicketID(req.Ticket) {
		return claimCall{}, nil, errors.New("redisstore: claim: malformed approval ticket")
	}
	op, err := validOpID(req.OpID)
	if err != nil {
		return claimCall{}, nil, err
	}
	vk := ""
	if b != "u" {
		vk = ss.vendorKey(req.Key, req.RequestHash)
	}
	fresh := ""
	if req.ApprovalRequired {
		fresh = idempotency.NewTicketID()
	}
	slot := keySlot(key)
	bucket, member := ss.bucket(slot), ss.member(req.Key)
	epoch, gen := s.genArg(slot)
	args := scriptargs.ClaimSpec.Argv(&scriptargs.Claim{
		ScopeVersion: scopeVersion, RequestHash: rh, Binding: b, Fingerprint: fp, Route: route, KeySource: ks,
		Approval: req.ApprovalRequired, Presented: req.Ticket, Fresh: fresh, Op: opTag('c', op),
		Lease: s.lease, Retention: s.retention, VendorKey: vk, URetention: s.uretention,
		Timeout: int(timeout.Milliseconds()), Refuse: req.Refuse, NoCreate: req.NoCreate, Member: member,
		Window: int(window.Milliseconds()), Incarnation: newIncarnation(), MaxAttempts: maxAtt, Gen: gen,
	})
	return claimCall{key: key, bucket: bucket, pending: ss.pending(slot), member: member,
		route: route, vk: vk, fresh: fresh, rh: rh, slot: slot, gen: gen, epoch: epoch}, args, nil
}

func parseClaim(scope idempotency.Scope, key idempotency.Key, arr []rueidis.RedisMessage) (idempotency.ClaimResult, error) {
	if len(arr) == 0 {
		return idempotency.ClaimResult{}, errors.New("empty script reply")
	}
	st, err := status(arr)
	if err != nil {
		return idempotency.ClaimResult{}, err
	}
	res := idempotency.ClaimResult{Status: st}
	applied := func(i int) bool {
		if len(arr) <= i {
			return false
		}
		v, err := arr[i].AsInt64()
		return err == nil && v == 1
	}
	switch res.Status {
	case idempotency.StatusClaimed:
		if len(arr) <= claimedLease {
			return res, errors.New("short claim reply")
		}
		n, err1 := arr[claimedToken].AsInt64()
		l, err2 := arr[claimedLease].AsInt64()
		if err := errors.Join(err1, err2); err != nil {
			return res, err
		}
		res.Token, res.LeaseDeadline, res.AlreadyApplied = int(n), time.UnixMilli(l).UTC(), applied(claimedApplied)
		if len(arr) > claimedDeadline {
			if res.AttemptDeadline, err = deadline(arr[claimedDeadline]); err != nil {
				return res, err
			}
		}
		if len(arr) > claimedIncarnation {
			inc, err := arr[claimedIncarnation].ToString()
			if err != nil {
				return res, err
			}
			res.Incarnation = hex.EncodeToString([]byte(inc))
		}
		if len(arr) > claimedVendorKey {
			vk, err := arr[claimedVendorKey].ToString()
			if err != nil {
				return res, err
			}
			if vk != "" {
				if res.VendorKey, err = unpackKey(vk); err != nil {
					return res, err
				}
			}
		}
	case idempotency.StatusHeld:
		if len(arr) < 2 {
			return res, errors.New("short claim reply")
		}
		if res.Ticket, err = arr[1].ToString(); err != nil {
			return res, err
		}
		res.AlreadyApplied = applied(2)
	case idempotency.StatusOutcomeUnknown:
		res.AlreadyApplied = applied(1)
		// {outcome_unknown, applied, moved, why, wait}: moved is the
		// record's TTL before the lease-expiry path moved it (accountClaim);
		// why, for a redispatch refused by its limit, and for a backoff
		// how long until it is allowed.
		if len(arr) > 3 {
			why, err := statusAt(arr, 3)
			if err != nil {
				return res, err
			}
			switch why {
			case storereply.MaxAttempts:
				res.MaxAttemptsReached = true
			case storereply.Backoff:
				if len(arr) < 5 {
					return res, errors.New("short claim reply")
				}
				ms, err := arr[4].AsInt64()
				if err != nil {
					return res, err
				}
				res.RetryAfter = time.Duration(ms) * time.Millisecond
			default:
				return res, fmt.Errorf("unexpected outcome_unknown limit %q", why)
			}
		}
	case idempotency.StatusInProgress:
		if len(arr) > 1 {
			if res.AttemptDeadline, err = deadline(arr[1]); err != nil {
				return res, err
			}
		}
	case idempotency.StatusReplay:
		if len(arr) < 2 {
			return res, errors.New("short claim reply")
		}
		raw, err := arr[1].ToString()
		if err != nil {
			return res, err
		}
		rec, err := decodeStored(scope, key, raw, 0, schemaVersion)
		if err != nil {
			return res, err
		}
		res.Record = &rec
	case idempotency.StatusRequestMismatch, idempotency.StatusDestinationConflict,
		idempotency.StatusDenied, idempotency.StatusScopeVersionConflict, idempotency.StatusRefused,
		idempotency.StatusNoRecord:
	default:
		return res, fmt.Errorf("unexpected claim status %q", st)
	}
	return res, nil
}

// newIncarnation makes the nonce a record made by a claim gets (field i):
// 8 bytes from crypto/rand.
func newIncarnation() string {
	var b [8]byte
	rand.Read(b[:])
	return string(b[:])
}
