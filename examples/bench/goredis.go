package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// handClaim is the reference of row 2: the same claim as a team would write
// it by hand with go-redis, without Lua. It keeps the same record layout (the
// hash fields of redisstore's schema 1) and the same checks as the claim
// script, so that Redis stores the same bytes, but with the usual optimistic
// transaction:
//
//	WATCH key                                   round trip 1
//	HMGET key rh b fp s l n                     round trip 2
//	MULTI, HSET key ..., PEXPIRE key, EXEC       round trip 3 (pipelined)
//
// retried when EXEC reports that the key changed. Time comes from the
// gateway's clock, as it would by hand (the script uses Redis TIME). Approval
// (held, tickets) and operation-id replays are left out: they cost the
// script nothing on a fresh key either.
type handClaim struct {
	rdb                *redis.Client
	leaseMS, retention int64
}

func newHandClaim(addr string, db, concurrency int) *handClaim {
	// Watch takes a connection from the pool for the whole transaction, so
	// the pool gets one per worker rather than the default 10 per CPU, which
	// would queue workers behind each other.
	pool := max(concurrency, 10*runtime.GOMAXPROCS(0))
	return &handClaim{
		rdb:       redis.NewClient(&redis.Options{Addr: addr, DB: db, PoolSize: pool, DisableIdentity: true}),
		leaseMS:   (30 * time.Second).Milliseconds(),
		retention: 24 * time.Hour.Milliseconds(),
	}
}

func (h *handClaim) close() { h.rdb.Close() }

// claimArgs are the values a claim pins (already validated and encoded as
// redisstore stores them).
type claimArgs struct {
	rh, b, fp, rc, rp, ks, op, vk string
}

// claim returns the status of the state table: claimed, request_mismatch,
// destination_conflict, in_progress, replay or outcome_unknown.
func (h *handClaim) claim(ctx context.Context, key string, a claimArgs) (string, error) {
	for range 10 {
		var status string
		err := h.rdb.Watch(ctx, func(tx *redis.Tx) error {
			v, err := tx.HMGet(ctx, key, "rh", "b", "fp", "s", "l", "n").Result()
			if err != nil {
				return err
			}
			str := func(i int) string { s, _ := v[i].(string); return s }
			now := time.Now().UnixMilli()
			lease := strconv.FormatInt(now+h.leaseMS, 10)
			nowS := strconv.FormatInt(now, 10)
			if v[3] == nil {
				_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
					p.HSet(ctx, key, "v", "1", "sv", "1", "s", "f", "ks", a.ks, "rh", a.rh, "b", a.b, "fp", a.fp,
						"rc", a.rc, "rp", a.rp, "vk", a.vk, "n", "1", "cy", "1", "l", lease, "ca", nowS, "ua", nowS, "op", "c"+a.op)
					p.PExpire(ctx, key, time.Duration(h.retention)*time.Millisecond)
					return nil
				})
				status = "claimed"
				return err
			}
			switch {
			case str(0) != a.rh:
				status = "request_mismatch"
				return nil
			case str(1) != a.b || str(2) != a.fp:
				status = "destination_conflict"
				return nil
			}
			l, _ := strconv.ParseInt(str(4), 10, 64)
			n, _ := strconv.Atoi(str(5))
			switch s := str(3); {
			case s == "f" && l > now:
				status = "in_progress"
				return nil
			case s == "a" || s == "r":
				status = "replay"
				return tx.HGetAll(ctx, key).Err()
			case s == "f" || s == "u":
				if a.b == "u" {
					status = "outcome_unknown"
					return nil
				}
				_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
					p.HDel(ctx, key, "st", "bd", "bx", "fa")
					p.HSet(ctx, key, "s", "f", "n", strconv.Itoa(n+1), "cy", "1", "l", lease, "ua", nowS, "op", "c"+a.op)
					p.PExpire(ctx, key, time.Duration(h.retention)*time.Millisecond)
					return nil
				})
				status = "claimed"
				return err
			default:
				status = "other"
				return nil
			}
		}, key)
		if errors.Is(err, redis.TxFailedErr) {
			continue // the key changed under the WATCH: read it again
		}
		return status, err
	}
	return "", fmt.Errorf("go-redis claim of %s: the key kept changing", key)
}
