package redisstore

import (
	"fmt"
	"time"

	"github.com/obol-gateway/obol/idempotency"
)

// MinRetentionLeases is how many leases Retention must span at least. A
// record outlives its last change by Retention, and an attempt reserved by a
// gateway that then died is only known as unknown while its record lives: the
// time between the end of its lease and the end of the record is when a
// client's retry is answered outcome_unknown instead of finding an empty slot
// and dispatching again. Clients retry on the scale of the call's timeout,
// which the lease bounds, so that window is at least one more lease.
//
// DESIGN.md section 7 asks the retention to exceed the largest tool timeout
// plus the lease. The store sees each attempt's timeout (ClaimRequest.Timeout,
// ReserveRequest.Timeout): a claim or reservation whose timeout plus the
// lease reaches UnknownRetention, the TTL a reservation sets, is refused
// with idempotency.ErrRetentionTooShort before anything is sent, since the
// record would expire under the live attempt and a new claim would restart
// its fencing tokens. The defaults (7 days against at most 15m) never do.
const MinRetentionLeases = 2

// resolve fills the zero defaults of o and checks that the store can keep its
// promises with the result. Every refusal wraps ErrInvalidOptions and names
// the field. New calls it before sending anything.
func (o Options) resolve() (Options, error) {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"retention", o.Retention},
		{"unknown retention", o.UnknownRetention},
		{"lease", o.Lease},
		{"wait timeout", o.WaitTimeout},
		{"read timeout", o.ReadTimeout},
	} {
		if d.v < 0 {
			return o, fmt.Errorf("%w: %s %v: must not be negative", ErrInvalidOptions, d.name, d.v)
		}
	}
	if o.Prefix == "" {
		o.Prefix = idempotency.DefaultPrefix
	}
	if err := idempotency.ValidatePrefix(o.Prefix); err != nil {
		return o, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	if o.Retention == 0 {
		o.Retention = DefaultRetention
	}
	if o.UnknownRetention == 0 {
		o.UnknownRetention = max(DefaultUnknownRetention, o.Retention)
	}
	if o.Lease == 0 {
		o.Lease = DefaultLease
	}
	if o.MaxResultBytes == 0 {
		o.MaxResultBytes = DefaultMaxResultBytes
	}
	if o.WaitTimeout == 0 {
		o.WaitTimeout = DefaultWaitTimeout
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = DefaultReadTimeout
	}
	// Divisions, not products: a product of two huge durations overflows
	// into a negative one and would pass.
	switch {
	case o.Lease < time.Millisecond:
		// The scripts count in milliseconds.
		return o, fmt.Errorf("%w: lease %v: must be at least 1ms", ErrInvalidOptions, o.Lease)
	case o.Retention/MinRetentionLeases < o.Lease:
		return o, fmt.Errorf("%w: retention %v: must be at least %d times the lease %v", ErrInvalidOptions, o.Retention, MinRetentionLeases, o.Lease)
	case o.UnknownRetention < o.Retention:
		return o, fmt.Errorf("%w: unknown retention %v: must be at least the retention %v", ErrInvalidOptions, o.UnknownRetention, o.Retention)
	case o.MaxResultBytes < 0:
		return o, fmt.Errorf("%w: max result bytes %d: must not be negative", ErrInvalidOptions, o.MaxResultBytes)
	case o.MaxResultBytes > maxBodyBytes:
		return o, fmt.Errorf("%w: max result bytes %d: at most %d (what decoding a stored body may allocate)", ErrInvalidOptions, o.MaxResultBytes, maxBodyBytes)
	case o.WaitReplicas < 0:
		return o, fmt.Errorf("%w: wait replicas %d: must not be negative", ErrInvalidOptions, o.WaitReplicas)
	case o.WaitTimeout < time.Millisecond:
		return o, fmt.Errorf("%w: wait timeout %v: must be at least 1ms", ErrInvalidOptions, o.WaitTimeout)
	case o.WaitReplicas > 0 && o.WaitTimeout > o.Lease/2:
		// A WAIT that may take the whole lease leaves no time to send.
		return o, fmt.Errorf("%w: wait timeout %v: must be at most half the lease %v", ErrInvalidOptions, o.WaitTimeout, o.Lease)
	}
	return o, nil
}
