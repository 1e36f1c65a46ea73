package redisstore

import (
	"fmt"
	"strings"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

// Defaults of the zero [Options]: a zero field means its default, and
// [Options.Resolve] fills in every one (a program that documents its own
// defaults shows what Options{}.Resolve returns).
const (
	// defaultRetention is [Options.Retention] when zero: how long a final
	// record lives after its last change.
	defaultRetention = 24 * time.Hour
	// defaultUnknownRetention is [Options.UnknownRetention] when zero, unless
	// Retention is longer (then Retention).
	defaultUnknownRetention = 7 * 24 * time.Hour
	defaultLease            = 10 * time.Second // Options.Lease
	defaultWaitTimeout      = time.Second      // Options.WaitTimeout

	defaultMaxResultBytes = 64 << 10
	defaultReadTimeout    = 5 * time.Second
	defaultMigrationWait  = 5 * time.Second
)

// Bounds of [Options], besides [MinRetentionLeases] and the relations it
// states (UnknownRetention at least Retention, WaitTimeout at most half
// the lease with WaitReplicas).
const (
	minLease       = time.Millisecond // the scripts count in milliseconds
	minWaitTimeout = time.Millisecond // WAIT counts in milliseconds
)

// MinRetentionLeases is how many leases Retention must span at least. A
// record outlives its last change by Retention, and an attempt reserved by a
// gateway that then died is only known as unknown while its record lives: the
// time between the end of its lease and the end of the record is when a
// client's retry is answered outcome_unknown instead of finding an empty slot
// and dispatching again. Clients retry on the scale of the call's timeout,
// which the lease bounds, so that window is at least one more lease.
//
// docs/DESIGN.md, "EffectSpec (JSON, one object per tool)", asks the
// retention to exceed the largest tool timeout plus the lease. The store sees each attempt's timeout (ClaimRequest.Timeout,
// ReserveRequest.Timeout): a claim or reservation whose timeout plus the
// lease reaches UnknownRetention, the TTL a reservation sets, is refused
// with [idempotency.ErrRetentionTooShort] before anything is sent, since the
// record would expire under the live attempt and a new claim would restart
// its fencing tokens. The defaults (7 days against at most 15m) never do.
const MinRetentionLeases = 2

// refuse is a refusal of one field of [Options], by its Go name
// ("Retention", "Lease", ...): an [effectspec.FieldError] wrapping
// [ErrInvalidConfig], "redisstore: options: Retention: must be at least 2
// times the lease 10s". The Problem says why without the refused value (a
// program that reads the options from elsewhere words it in its own
// terms), naming the value of a field it is relative to, default included.
func refuse(option, format string, args ...any) *effectspec.FieldError {
	return &effectspec.FieldError{Err: ErrInvalidConfig, Subject: "options", Field: option, Problem: fmt.Sprintf(format, args...)}
}

// Resolve returns o as [New] uses it: every zero field set to its default
// (Lease 10s, Retention 24h, ...; Prefix [idempotency.DefaultPrefix]),
// checked that the store can keep its promises with the result. On a
// refusal it returns an *[effectspec.FieldError] that wraps [ErrInvalidConfig]
// and names the field, and [Options] that are not to be used. [New] calls it before
// sending anything.
func (o Options) Resolve() (Options, error) {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"Retention", o.Retention},
		{"UnknownRetention", o.UnknownRetention},
		{"Lease", o.Lease},
		{"WaitTimeout", o.WaitTimeout},
		{"ReadTimeout", o.ReadTimeout},
		{"MigrationWait", o.MigrationWait},
		{"AccountBytes", o.AccountBytes},
	} {
		if d.v < 0 {
			return o, refuse(d.name, "must not be negative")
		}
	}
	if o.Prefix == "" {
		o.Prefix = idempotency.DefaultPrefix
	}
	if err := idempotency.ValidatePrefix(o.Prefix); err != nil {
		// The idempotency error too: errors.Is finds ErrInvalidScope.
		fe := refuse("Prefix", "%s", strings.TrimPrefix(err.Error(), idempotency.ErrInvalidScope.Error()+": prefix: "))
		fe.Err = fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		return o, fe
	}
	if o.Retention == 0 {
		o.Retention = defaultRetention
	}
	if o.UnknownRetention == 0 {
		o.UnknownRetention = max(defaultUnknownRetention, o.Retention)
	}
	if o.Lease == 0 {
		o.Lease = defaultLease
	}
	if o.MaxResultBytes == 0 {
		o.MaxResultBytes = defaultMaxResultBytes
	}
	if o.WaitTimeout == 0 {
		o.WaitTimeout = defaultWaitTimeout
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = defaultReadTimeout
	}
	if o.MigrationWait == 0 {
		o.MigrationWait = defaultMigrationWait
	}
	// Divisions, not products: a product of two huge durations overflows
	// into a negative one and would pass.
	switch {
	case o.Lease < minLease:
		return o, refuse("Lease", "must be at least %v", minLease)
	case o.Retention/MinRetentionLeases < o.Lease:
		return o, refuse("Retention", "must be at least %d times the lease %v", MinRetentionLeases, o.Lease)
	case o.UnknownRetention < o.Retention:
		return o, refuse("UnknownRetention", "must be at least the retention %v", o.Retention)
	case o.MaxResultBytes < 0:
		return o, refuse("MaxResultBytes", "must not be negative")
	case o.MaxResultBytes > maxBodyBytes:
		return o, refuse("MaxResultBytes", "at most %d (what decoding a stored body may allocate)", maxBodyBytes)
	case o.WaitReplicas < 0:
		return o, refuse("WaitReplicas", "must not be negative")
	case o.WaitTimeout < minWaitTimeout:
		return o, refuse("WaitTimeout", "must be at least %v", minWaitTimeout)
	case o.WaitReplicas > 0 && o.WaitTimeout > o.Lease/2:
		// A WAIT that may take the whole lease leaves no time to send.
		return o, refuse("WaitTimeout", "must be at most half the lease %v", o.Lease)
	}
	if o.DeploymentID != "" {
		if err := ValidateDeploymentID(o.DeploymentID); err != nil {
			return o, refuse("DeploymentID", "%s", strings.TrimPrefix(err.Error(), "redisstore: deployment id: "))
		}
	}
	return o, nil
}

// Deployment ids ([Options.DeploymentID]): 128 to 256 random bits. Two fleets
// that share one share vendor keys, and their tenants could be served each
// other's answers at a shared vendor account, so an id that a person typed
// (a placeholder, a pattern) is refused: `openssl rand -hex 16` makes one.
const (
	minDeploymentDigits = 32
	maxDeploymentDigits = 64
	// minDeploymentDistinct: 32 random hex digits hold fewer than 6
	// distinct ones with a probability below 1e-12.
	minDeploymentDistinct = 6
	// maxDeploymentPeriod: an id that repeats a block of at most this many
	// digits (0000..., abab..., deadbeef x4, 0123456789abcdef x2) is a
	// placeholder, never random.
	maxDeploymentPeriod = 16
)

// ValidateDeploymentID reports why id cannot be a fleet's deployment id, or
// nil: it must be 32 to 64 lowercase hex digits, random (not a repeated
// block such as "00...0" or "deadbeef" four times, and at least 6 distinct
// digits). The error never quotes the id.
func ValidateDeploymentID(id string) error {
	if n := len(id); n < minDeploymentDigits || n > maxDeploymentDigits {
		return fmt.Errorf("redisstore: deployment id: must be %d to %d lowercase hex digits, not %d characters (make one with openssl rand -hex 16)",
			minDeploymentDigits, maxDeploymentDigits, n)
	}
	var seen [16]bool
	distinct := 0
	for i := 0; i < len(id); i++ {
		d := strings.IndexByte("0123456789abcdef", id[i])
		if d < 0 {
			return fmt.Errorf("redisstore: deployment id: character %d is not a lowercase hex digit (make one with openssl rand -hex 16)", i+1)
		}
		if !seen[d] {
			seen[d] = true
			distinct++
		}
	}
	for p := 1; p <= maxDeploymentPeriod; p++ {
		if len(id)%p == 0 && strings.Repeat(id[:p], len(id)/p) == id {
			return fmt.Errorf("redisstore: deployment id: repeats a block of %d digits, a placeholder rather than a random id (make one with openssl rand -hex 16)", p)
		}
	}
	if distinct < minDeploymentDistinct {
		return fmt.Errorf("redisstore: deployment id: only %d distinct digits, not a random id (make one with openssl rand -hex 16)", distinct)
	}
	return nil
}

// validDeployment reports whether a stored deployment id is one this
// package reads: 32 to 64 lowercase hex digits (an id a store made is 32;
// a configured one may be longer).
func validDeployment(id string) bool {
	if len(id) < minDeploymentDigits || len(id) > maxDeploymentDigits {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
