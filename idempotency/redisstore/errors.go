package redisstore

import (
	"errors"
	"strings"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/idempotency"
)

var (
	// ErrInvalidConfig: [New] refuses [Options] the store cannot work with
	// (a negative duration, a retention too short for the lease, ...).
	// Nothing was sent to Redis.
	ErrInvalidConfig = errors.New("redisstore: invalid options")
	// ErrEvictionPolicy: a Redis node's maxmemory-policy is not noeviction.
	// Eviction deletes live claims silently (a volatile-* policy targets
	// exactly our keys, since they carry TTLs), which lets a retry dispatch
	// twice.
	ErrEvictionPolicy = errors.New("redisstore: maxmemory-policy must be noeviction")
	// ErrUninitialized: [Options].RequireInit is set and Redis holds no
	// generation sentinel: the store was never initialised ([Init]), or it
	// lost everything while no gateway ran. [New] refuses to start rather
	// than start the store over (docs/DESIGN.md, "The record and its
	// lifecycle", Store amnesia).
	ErrUninitialized = errors.New("redisstore: the store is not initialised")
	// ErrDeploymentMismatch: [Options].DeploymentID differs from the
	// fleet's deployment id stored in Redis. [New] refuses to start and
	// never overwrites the stored one.
	ErrDeploymentMismatch = errors.New("redisstore: the configured deployment id is not the fleet's")
	// ErrOutOfMemory: Redis refused a write for lack of memory (an OOM
	// reply under maxmemory-policy noeviction, also from inside a script).
	// The failed operation's error matches it and
	// [idempotency.ErrStoreUnavailable].
	ErrOutOfMemory = errors.New("redisstore: Redis is out of memory")
)

var (
	// errReplicas: fewer replicas than [Options.WaitReplicas] acknowledged a
	// reservation within [Options.WaitTimeout]. The reservation is not
	// trusted: do not send. The store has finalized it as never sent (best
	// effort), so it does not burn the slot. The operation's error wraps
	// it, and matches [idempotency.ErrStoreUnavailable].
	errReplicas = errors.New("redisstore: too few replicas acknowledged the reservation")
	// errReplicaCount: [New] was asked for more WaitReplicas than the replicas
	// connected to a master: every reservation there would fail its WAIT.
	errReplicaCount = errors.New("redisstore: wait replicas exceed the connected replicas")
	// errCorruptRecord: a stored record or ticket that this package cannot
	// read (another schema, or written by something else).
	errCorruptRecord = errors.New("redisstore: unreadable record")
)

// unavailableError is a failed store operation: Redis answered with an error, did not
// answer in time, or a reservation lacked its replica acknowledgements. The
// operation may or may not have been applied; re-send it with the same OpID or
// settle the state with Lookup. It matches [idempotency.ErrStoreUnavailable]
// and its cause under errors.Is.
type unavailableError struct {
	Op  string // "claim", "reserve", "renew", "finalize", "lookup", "ticket", "decide", "pin", "setpin", "initpin", "new", "settle", "list", "giveback", "acknowledge"
	Err error
}

func (e *unavailableError) Error() string {
	return "redisstore: " + e.Op + ": " + idempotency.ErrStoreUnavailable.Error() + ": " + e.Err.Error()
}

// Unwrap returns [idempotency.ErrStoreUnavailable] and the cause.
func (e *unavailableError) Unwrap() []error {
	if outOfMemory(e.Err) {
		return []error{idempotency.ErrStoreUnavailable, ErrOutOfMemory, e.Err}
	}
	return []error{idempotency.ErrStoreUnavailable, e.Err}
}

func opError(op string, err error) error { return &unavailableError{Op: op, Err: err} }

// outOfMemory reports whether err holds Redis's OOM error reply (a write
// refused over maxmemory; from inside a script, the reply quotes it).
func outOfMemory(err error) bool {
	var re *rueidis.RedisError
	return errors.As(err, &re) && strings.Contains(re.Error(), "OOM ")
}
