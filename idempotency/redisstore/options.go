package redisstore

import (
	"fmt"
	"strings"
	"time"

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

// OptionError is a refusal of one field of [Options], by [New] or
// [Options.Resolve]. It wraps [ErrInvalidConfig] (and, for Prefix, the
// idempotency error that refuses the prefix). Its message names the field
// in words and shows the value: "redisstore: invalid options: retention
// 10s: must be at least 2 times the lease 10s".
type OptionError struct {
	// Option is the refused field, by its Go name: "Retention",
	// "UnknownRetention", "Lease", "WaitReplicas", "WaitTimeout", ... A
	// program that reads the options from elsewhere maps it to its own name
	// for the field.
	Option string
	// Relative is the field the bound is relative to, by its Go name, when
	// it is one ("Lease" for a Retention shorter than [MinRetentionLeases]
	// leases, "Retention" for a shorter UnknownRetention), or "". Its value
	// is the resolved one, default included.
	Relative string
	// Reason says why, without the refused value: "must not be negative",
	// "must be at least 2 times the lease 10s".
	Reason string
	value  string // as shown in the message
	err    error  // the cause, if another package's
}

func (e *OptionError) Error() string {
	if e.err != nil {
		return fmt.Sprintf("%v: %v", ErrInvalidConfig, e.err)
	}
	return fmt.Sprintf("%v: %s %s: %s", ErrInvalidConfig, optionWords[e.Option], e.value, e.Reason)
}

// Unwrap returns [ErrInvalidConfig] and the cause, if any.
func (e *OptionError) Unwrap() []error {
	if e.err != nil {
		return []error{ErrInvalidConfig, e.err}
	}
	return []error{ErrInvalidConfig}
}

// optionWords names each field in messages.
var optionWords = map[string]string{
	"Prefix":           "prefix",
	"Retention":        "retention",
	"UnknownRetention": "unknown retention",
	"Lease":            "lease",
	"MaxResultBytes":   "max result bytes",
	"WaitReplicas":     "wait replicas",
	"WaitTimeout":      "wait timeout",
	"ReadTimeout":      "read timeout",
	"DeploymentID":     "deployment id",
	"MigrationWait":    "migration wait",
	"AccountBytes":     "account bytes",
}

func refuse(option string, value any, relative, format string, args ...any) *OptionError {
	return &OptionError{Option: option, Relative: relative, Reason: fmt.Sprintf(format, args...), value: fmt.Sprint(value)}
}

// Resolve returns o as [New] uses it: every zero field set to its default
// (Lease 10s, Retention 24h, ...; Prefix [idempotency.DefaultPrefix]),
// checked that the store can keep its promises with the result. On a
// refusal it returns an *[OptionError] that wraps [ErrInvalidConfig] and names
// the field, and [Options] that are not to be used. [New] calls it before
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
			return o, refuse(d.name, d.v, "", "must not be negative")
		}
	}
	if o.Prefix == "" {
		o.Prefix = idempotency.DefaultPrefix
	}
	if err := idempotency.ValidatePrefix(o.Prefix); err != nil {
		return o, &OptionError{Option: "Prefix", Reason: err.Error(), value: o.Prefix, err: err}
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
		return o, refuse("Lease", o.Lease, "", "must be at least %v", minLease)
	case o.Retention/MinRetentionLeases < o.Lease:
		return o, refuse("Retention", o.Retention, "Lease", "must be at least %d times the lease %v", MinRetentionLeases, o.Lease)
	case o.UnknownRetention < o.Retention:
		return o, refuse("UnknownRetention", o.UnknownRetention, "Retention", "must be at least the retention %v", o.Retention)
	case o.MaxResultBytes < 0:
		return o, refuse("MaxResultBytes", o.MaxResultBytes, "", "must not be negative")
	case o.MaxResultBytes > maxBodyBytes:
		return o, refuse("MaxResultBytes", o.MaxResultBytes, "", "at most %d (what decoding a stored body may allocate)", maxBodyBytes)
	case o.WaitReplicas < 0:
		return o, refuse("WaitReplicas", o.WaitReplicas, "", "must not be negative")
	case o.WaitTimeout < minWaitTimeout:
		return o, refuse("WaitTimeout", o.WaitTimeout, "", "must be at least %v", minWaitTimeout)
	case o.WaitReplicas > 0 && o.WaitTimeout > o.Lease/2:
		// A WAIT that may take the whole lease leaves no time to send.
		return o, refuse("WaitTimeout", o.WaitTimeout, "Lease", "must be at most half the lease %v", o.Lease)
	}
	if o.DeploymentID != "" {
		if err := ValidateDeploymentID(o.DeploymentID); err != nil {
			return o, &OptionError{Option: "DeploymentID", Reason: strings.TrimPrefix(err.Error(), "redisstore: deployment id: "), value: o.DeploymentID}
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
