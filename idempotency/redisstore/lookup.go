package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/storereply"
)

// Lookup reads a record with a read-only script, judging its lease by the
// Redis clock. It runs as EVALSHA_RO, in which Redis refuses any write; a
// server that refuses TIME there (miniredis) gets the same script by
// EVALSHA.
func (s *Store) Lookup(ctx context.Context, scope idempotency.Scope, key idempotency.Key) (idempotency.Record, error) {
	rk, err := scope.StorageKey(s.prefix, key)
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: lookup: %w", err)
	}
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	arr, _, err := s.exec(ctx, s.sc.lookup, rk, nil, false)
	if err != nil {
		return idempotency.Record{}, opError("lookup", err)
	}
	return parseLookup(scope, key, arr)
}

// lookupAt is Lookup that also returns the server time it judged by (ms).
func (s *Store) lookupAt(ctx context.Context, scope idempotency.Scope, key idempotency.Key) (idempotency.Record, int64, error) {
	rk, err := scope.StorageKey(s.prefix, key)
	if err != nil {
		return idempotency.Record{}, 0, fmt.Errorf("redisstore: lookup: %w", err)
	}
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	arr, _, err := s.exec(ctx, s.sc.lookup, rk, nil, false)
	if err != nil {
		return idempotency.Record{}, 0, opError("lookup", err)
	}
	rec, err := parseLookup(scope, key, arr)
	var now int64
	if err == nil && len(arr) > 1 {
		now, _ = arr[1].AsInt64()
	}
	return rec, now, err
}

// parseLookup reads the lookup script's reply.
func parseLookup(scope idempotency.Scope, key idempotency.Key, arr []rueidis.RedisMessage) (idempotency.Record, error) {
	st, err := status(arr)
	if err != nil {
		return idempotency.Record{}, opError("lookup", err)
	}
	if st == storereply.NotFound {
		return idempotency.Record{}, fmt.Errorf("redisstore: lookup: %w", idempotency.ErrNotFound)
	}
	if st != storereply.Found || len(arr) < 3 {
		return idempotency.Record{}, opError("lookup", fmt.Errorf("unexpected reply %q", st))
	}
	now, err1 := arr[1].AsInt64()
	raw, err2 := arr[2].ToString()
	if err := errors.Join(err1, err2); err != nil {
		return idempotency.Record{}, opError("lookup", err)
	}
	version := schemaVersion
	if len(arr) > 3 {
		if legacy, _ := arr[3].AsInt64(); legacy == 1 {
			version = legacySchema
		}
	}
	rec, err := decodeStored(scope, key, raw, now, version)
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: lookup: %w", err)
	}
	return rec, nil
}
