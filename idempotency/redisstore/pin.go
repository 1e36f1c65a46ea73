package redisstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/ident"
)

// pinKey names the pin of a capability: {prefix}pin:{capability}, a plain
// string in its own slot naming its provider, so that every gateway on one
// Redis routes a new capability call alike.
func (s *Store) pinKey(capability string) string { return s.prefix + "pin:" + capability }

// Pin returns the provider stored as the pin of capability, and false when
// none is stored (the caller then uses its configured pin). rueidis re-sends
// this read-only GET after a network error or a LOADING reply until ctx
// ends: give it a deadline.
func (s *Store) Pin(ctx context.Context, capability string) (provider string, ok bool, err error) {
	if err := validCapability(capability); err != nil {
		return "", false, err
	}
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	v, err := s.client.Do(ctx, s.client.B().Get().Key(s.pinKey(capability)).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, opError("pin", err)
	}
	if validProvider(v) != nil {
		return "", false, fmt.Errorf("redisstore: pin: %w: the pin of %s is not a tool name", errCorruptRecord, capability)
	}
	return v, true, nil
}

// SetPin stores provider as the pin of capability, replacing any, and
// returns the provider it replaced ("" when none was stored). The key has no
// TTL: a pin is configuration, not a record, and lives until it is replaced
// or deleted.
func (s *Store) SetPin(ctx context.Context, capability, provider string) (previous string, err error) {
	return s.setPin(ctx, "setpin", capability, provider, false)
}

// InitPin stores provider as the pin of capability unless a pin is stored
// already (SET NX), and returns the pin in effect: provider, or the stored
// one. A process starting with a configured pin calls it, so that a restart
// keeps a pin changed since. No TTL, as with SetPin.
func (s *Store) InitPin(ctx context.Context, capability, provider string) (pin string, err error) {
	prev, err := s.setPin(ctx, "initpin", capability, provider, true)
	if err != nil || prev == "" {
		return provider, err
	}
	return prev, nil
}

// setPin runs SET ... [NX] GET: one round trip that answers the value the
// key held before (Redis 7.0 accepts NX with GET).
func (s *Store) setPin(ctx context.Context, op, capability, provider string, nx bool) (string, error) {
	if err := validCapability(capability); err != nil {
		return "", err
	}
	if err := validProvider(provider); err != nil {
		return "", err
	}
	b := s.client.B().Set().Key(s.pinKey(capability)).Value(provider)
	var cmd rueidis.Completed
	if nx {
		cmd = b.Nx().Get().Build()
	} else {
		cmd = b.Get().Build()
	}
	prev, err := s.client.Do(ctx, cmd).ToString()
	if rueidis.IsRedisNil(err) {
		return "", nil
	}
	if err != nil {
		return "", opError(op, err)
	}
	if validProvider(prev) != nil {
		return "", fmt.Errorf("redisstore: %s: %w: the previous pin of %s is not a tool name", op, errCorruptRecord, capability)
	}
	return prev, nil
}

// validCapability checks a capability name: "cap." and then tool-name bytes,
// at most 128 in all. Braces and colons are refused, so the pin key stays in
// its own slot and cannot be read as another key.
func validCapability(name string) error {
	if !strings.HasPrefix(name, "cap.") || len(name) == len("cap.") {
		return fmt.Errorf("redisstore: pin: %w: capability: must be cap. followed by a tool name", idempotency.ErrInvalidRequest)
	}
	return validName("capability", name)
}

// validProvider checks a provider: a tool name that is not a capability.
func validProvider(name string) error {
	if strings.HasPrefix(name, "cap.") {
		return fmt.Errorf("redisstore: pin: %w: provider: must be a tool, not a capability", idempotency.ErrInvalidRequest)
	}
	return validName("provider", name)
}

// validName applies the segment rules of [idempotency.Scope]: 1 to 128 bytes
// of [A-Za-z0-9_.-]. The error names the byte, never echoes the input.
func validName(field, v string) error {
	if err := ident.Check(v); err != nil {
		return fmt.Errorf("redisstore: pin: %w: %s: %v", idempotency.ErrInvalidRequest, field, err)
	}
	return nil
}
