package redisstore

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/scriptargs"
	"github.com/obol-gateway/obol/receipt"
)

// Options configure a [Store]. The zero value is ready to use: a zero field
// means its default (see each field). [New] refuses, with an
// *[effectspec.FieldError] wrapping [ErrInvalidConfig], a negative duration or count
// and the other limits below; [Options.Resolve] tells the same in advance.
type Options struct {
	// Prefix starts every key. If empty, [idempotency.DefaultPrefix] ("obol:").
	Prefix string
	// Retention is how long a record lives after its last change: a final
	// outcome sets it, and a held or denied record keeps it. If zero, 24h.
	// It must be at least [MinRetentionLeases] times Lease, and should exceed the largest tool timeout plus Lease
	// (docs/DESIGN.md, "EffectSpec (JSON, one object per tool)").
	// UnknownRetention must: a claim or reservation of a longer attempt is
	// refused ([idempotency.ErrRetentionTooShort]).
	Retention time.Duration
	// UnknownRetention is how long a record lives after a reservation or an
	// unknown outcome: a key that expires re-opens its slot, and an unknown
	// call is the one whose retry is most dangerous. A final outcome sets
	// Retention. If zero, 7 days, or Retention if that is longer; at least
	// Retention.
	UnknownRetention time.Duration
	// Lease bounds one reserved attempt until its owner renews it (Renew).
	// If zero, 10s; at least 1ms.
	Lease time.Duration
	// MaxResultBytes caps the stored result (body plus kept headers). Over
	// it, the status and receipt are kept, the body is dropped and a replay
	// says BodyDropped; headers that alone exceed it are dropped too. Only
	// [idempotency.SafeHeader] headers are stored. If zero, 64 KiB; at most
	// 64 MiB, which bounds what decoding a stored (compressed) body may
	// allocate.
	MaxResultBytes int
	// WaitReplicas, if > 0, makes every reservation (a claimed Claim and a
	// Reserve) wait until that many replicas acknowledged it, on the same
	// connection, in the same round trip. If fewer do within WaitTimeout the
	// call fails (store unavailable): the reservation is not to be used, and
	// the store finalizes it as never sent (best effort, right after), so
	// that the next claim re-opens the slot with the next token and waits
	// again. [New] refuses a WaitReplicas above the replicas connected to any
	// master. With fewer WaitReplicas than replicas, a
	// failover may promote a replica that lacks a reservation: the slot then
	// looks free, or as before the attempt, and may be dispatched again.
	// After a failover the promoted master has no replica until one rejoins
	// (the old master, restarted, say); until then every reservation on its
	// slots fails closed. Finalizes are not WAITed: a
	// failover may roll a finalized record back to in flight, which then
	// reads unknown once its lease ends, never accepted by mistake.
	WaitReplicas int
	// WaitTimeout bounds the WAIT. If zero, 1s; at least 1ms. With
	// WaitReplicas it must be at most half the lease: the WAIT is spent out
	// of the dispatch time.
	WaitTimeout time.Duration
	// SkipEvictionCheck skips the check that every node runs with
	// maxmemory-policy noeviction. Only for services that block CONFIG GET
	// and for miniredis (which has no CONFIG and never evicts): with any
	// evicting policy, Redis deletes live claims silently under memory
	// pressure, and a retry then dispatches a second time.
	SkipEvictionCheck bool
	// ReadTimeout bounds each read-only call (Lookup, Ticket, Pin) whose ctx
	// has no earlier deadline. rueidis retries read-only commands on
	// connection errors and LOADING replies until ctx ends, so an unbounded
	// ctx could wait forever on a Redis that is starting. If zero, 5s.
	ReadTimeout time.Duration
	// DeploymentID, if set, is the fleet's deployment id, an input of every
	// vendor key (docs/DESIGN.md, "The key on the vendor hop"): 32 to 64
	// lowercase hex digits ([ValidateDeploymentID]). Kept stable when Redis
	// is rebuilt, it keeps the vendor keys of retried calls the same, so
	// vendors go on deduplicating them. [New] stores it when Redis holds
	// none and refuses to start ([ErrDeploymentMismatch]) when Redis holds
	// another; empty, [New] adopts the stored one or makes one.
	DeploymentID string
	// SkipDataLossCheck turns off the sentinels that see Redis lose data
	// (sentinel.go, generation.go): only for tests that flush Redis under a
	// store.
	SkipDataLossCheck bool
	// RequireInit makes [New] refuse a store that [Init] has not initialised
	// ([ErrUninitialized]: no generation sentinel) instead of initialising
	// it, and start stopped (a loss of data) on one that holds only some:
	// an empty Redis is then never taken for a fresh one. Production
	// gateways set it. Without it a slot's first reservation writes its
	// sentinel. With SkipDataLossCheck it does nothing.
	RequireInit bool
	// MigrationWait bounds how long the store re-sends a script that a
	// Cluster node answered TRYAGAIN: its slot is migrating and its keys
	// (the record and its unknown index bucket) are not all on one side, or
	// one does not exist, so Redis ran nothing. A fresh claim in a migrating
	// slot is answered so until the slot has moved. The re-sends back off
	// from 2ms, doubling, to 100ms, and end at ctx's deadline if that is
	// earlier; after MigrationWait the TRYAGAIN is returned as an error
	// matching [idempotency.ErrStoreUnavailable]. If zero, 5s: the move of
	// a slot of some thousands of keys at the pace of redis-cli --cluster reshard (a
	// MIGRATE of 10 keys per round trip). See docs/DESIGN.md, "Scope and
	// the Redis key".
	MigrationWait time.Duration
	// AccountBytes, if > 0, turns on the accounting of the bytes each
	// workspace's records store (StoredBytes, docs/DESIGN.md, "Quotas and
	// headroom"): the store counts what it writes in memory and flushes it
	// every AccountBytes in the background, one pipeline per flush, never
	// on a call's path. Close stops the flusher. Zero: nothing is counted
	// (StoredBytes still reads what other stores flushed).
	AccountBytes time.Duration
}

// Store is an [idempotency.Store] on Redis or Redis Cluster. It is safe for
// concurrent use.
//
// Every operation is one Lua script (scripts.go) on the record that
// [idempotency.Scope.StorageKey] names and, for the scripts that reserve an
// attempt or make a record final, the unknown index bucket of the same
// Cluster slot (ListUnknown), so it is valid on Redis Cluster and records
// spread over all slots. Time inside scripts is Redis TIME. Op ids are at
// most 63 bytes of [A-Za-z0-9_-]; an empty one is minted.
type Store struct {
	client      rueidis.Client
	prefix      string
	retention   string // milliseconds, as sent to the scripts
	uretention  string
	uretentionD time.Duration
	lease       string
	leaseD      time.Duration
	retentionMS int64
	maxResult   int
	waitN       int64
	waitMS      int64
	sc          scripts
	noTimeInRO  atomic.Bool // the server refuses TIME in EVALSHA_RO
	readTimeout time.Duration
	migrateWait time.Duration
	deployment  string // the fleet's id, an input of every vendor key
	scope       *scopeCheck
	scopes      *scopeCache // the strings of recent scopes (claim, finalize)
	acct        *accounting // nil unless Options.AccountBytes
	// written is the bytes this store's scripts wrote (estimated), and
	// mem the last MemoryFraction reading: MemoryEstimate.
	written atomic.Int64
	mem     atomic.Pointer[memReading]
	// noInfo: SkipEvictionCheck, where a server that refuses INFO memory
	// (miniredis) has no memory to watch.
	noInfo bool
	// deploymentSet: the id is [Options.DeploymentID], which an
	// acknowledged loss writes back.
	deploymentSet bool
}

// readCtx bounds a read-only call; see [Options.ReadTimeout].
func (s *Store) readCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= s.readTimeout {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.readTimeout)
}

// A Store has every optional part that package idempotency declares.
var _ interface {
	idempotency.Store
	idempotency.Settler
	idempotency.PendingLister
	idempotency.QuotaStore
	idempotency.PinStore
	idempotency.ScopeAdvancer
	idempotency.DataLossWatcher
	idempotency.HealthChecker
} = (*Store)(nil)

// New checks opts and the server (maxmemory-policy on every node the
// client knows, replicas too since one may be promoted, unless
// SkipEvictionCheck; with WaitReplicas, the replicas connected to every
// master, INFO replication), loads the scripts and returns a [Store]. The client stays
// owned by the caller; it must not set ConnLifetime, since an expiring
// connection makes rueidis re-send in-flight commands, writes included.
func New(ctx context.Context, client rueidis.Client, opts Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("redisstore: nil client")
	}
	opts, err := opts.Resolve()
	if err != nil {
		return nil, err
	}
	s := &Store{
		client:      client,
		scopes:      newScopeCache(),
		noInfo:      opts.SkipEvictionCheck,
		prefix:      opts.Prefix,
		retention:   strconv.FormatInt(opts.Retention.Milliseconds(), 10),
		uretention:  strconv.FormatInt(opts.UnknownRetention.Milliseconds(), 10),
		uretentionD: opts.UnknownRetention,
		lease:       strconv.FormatInt(opts.Lease.Milliseconds(), 10),
		leaseD:      opts.Lease,
		retentionMS: opts.Retention.Milliseconds(),
		maxResult:   opts.MaxResultBytes,
		waitN:       int64(opts.WaitReplicas),
		waitMS:      opts.WaitTimeout.Milliseconds(),
		sc:          newScripts(),
		readTimeout: opts.ReadTimeout,
		migrateWait: opts.MigrationWait,
	}
	nodes := client.Nodes()
	if !opts.SkipEvictionCheck {
		for addr, n := range nodes {
			m, err := n.Do(ctx, n.B().ConfigGet().Parameter("maxmemory-policy").Build()).AsStrMap()
			if err != nil {
				return nil, fmt.Errorf("redisstore: CONFIG GET maxmemory-policy on %s (set SkipEvictionCheck only if the service blocks CONFIG and never evicts): %w", addr, err)
			}
			if p := m["maxmemory-policy"]; p != "noeviction" {
				return nil, fmt.Errorf("%w: node %s has %q", ErrEvictionPolicy, addr, p)
			}
		}
	}
	if s.waitN > 0 {
		if err := checkReplicas(ctx, nodes, s.waitN); err != nil {
			return nil, err
		}
	}
	var am *amnesia
	if !opts.SkipDataLossCheck {
		if am, err = initAmnesia(ctx, client, opts); err != nil {
			return nil, err
		}
	}
	// A gateway that starts during a loss nobody acknowledged writes
	// neither the scope version nor the deployment id: the acknowledgement
	// restores them as the fleet had them.
	write := am == nil || am.lost.Load() == nil
	if s.scope, err = initScope(ctx, client, opts, write); err != nil {
		return nil, err
	}
	s.scope.amnesia = am
	dep, err := initDeployment(ctx, client, s.prefix, opts.DeploymentID, write)
	if err != nil {
		return nil, err
	}
	s.deployment, s.deploymentSet = dep, opts.DeploymentID != ""
	if am != nil {
		if err := am.placeAll(ctx); err != nil {
			return nil, err
		}
	}
	// Preload the scripts so that the first call is one round trip. Best
	// effort: EVALSHA falls back to EVAL on NOSCRIPT (a failover, a restart).
	for _, n := range nodes {
		for _, sc := range []*script{s.sc.claim, s.sc.reserve, s.sc.renew, s.sc.finalize, s.sc.lookup, s.sc.decide, s.sc.settle, s.sc.index} {
			n.Do(ctx, n.B().ScriptLoad().Script(sc.src).Build())
		}
		n.Do(ctx, n.B().ScriptLoad().Script(s.sc.giveback.src).Build())
	}
	if opts.AccountBytes > 0 {
		s.acct = newAccounting(s, opts.AccountBytes, opts.Retention)
	}
	return s, nil
}

// checkReplicas refuses a WAIT that could never pass: a master with fewer
// connected replicas than want would refuse every reservation it holds.
// Replica nodes (which a cluster client may list) are skipped.
func checkReplicas(ctx context.Context, nodes map[string]rueidis.Client, want int64) error {
	for addr, n := range nodes {
		info, err := n.Do(ctx, n.B().Info().Section("replication").Build()).ToString()
		if err != nil {
			return fmt.Errorf("redisstore: INFO replication on %s: %w", addr, err)
		}
		role, connected := "", int64(-1)
		for _, line := range strings.Split(info, "\n") {
			k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
			switch k {
			case "role":
				role = v
			case "connected_slaves":
				connected, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		if role != "master" {
			continue
		}
		if connected < want {
			return fmt.Errorf("%w: master %s has %d connected, wait replicas is %d", errReplicaCount, addr, max(connected, 0), want)
		}
	}
	return nil
}

// Lease returns the configured lease ([Options.Lease]).
func (s *Store) Lease() time.Duration { return s.leaseD }

// deploymentKey holds the fleet's deployment id.
func deploymentKey(prefix string) string { return prefix + "meta:deployment" }

// initDeployment reads the fleet's deployment id at {prefix}meta:deployment,
// or writes it (the configured one, else a fresh one): the first gateway's
// SET NX wins and every other reads its value in the same command (SET NX
// GET, Redis 7). A configured id that differs from the stored one refuses
// to start; the stored one is never overwritten. Without write (a loss
// nobody acknowledged) it writes nothing and keeps the configured id, which
// the acknowledgement writes back, over whatever Redis holds then.
func initDeployment(ctx context.Context, client rueidis.Client, prefix, configured string, write bool) (string, error) {
	fresh := configured
	if fresh == "" {
		fresh = idempotency.NewDeploymentID()
	}
	cmd := client.B().Set().Key(deploymentKey(prefix)).Value(fresh).Nx().Get().Build()
	if !write {
		cmd = client.B().Get().Key(deploymentKey(prefix)).Build()
	}
	old, err := client.Do(ctx, cmd).ToString()
	switch {
	case rueidis.IsRedisNil(err):
		return fresh, nil
	case err != nil:
		return "", fmt.Errorf("redisstore: deployment id: %w", err)
	case !write && configured != "":
		return configured, nil
	case !validDeployment(old):
		return "", fmt.Errorf("%w: %s is not 32 to 64 lowercase hex digits", errCorruptRecord, deploymentKey(prefix))
	case configured != "" && old != configured:
		return "", fmt.Errorf("%w: %s holds %s, the configured deployment id is %s: configure the stored one (it names this fleet "+
			"in every vendor key), or use another key prefix or Redis for another fleet", ErrDeploymentMismatch, deploymentKey(prefix), old, configured)
	}
	return old, nil
}

// Deployment returns the fleet's deployment id (docs/DESIGN.md, "The key on the
// vendor hop"): made once per key prefix on a Redis deployment, by the first
// [Store], and read by every later one.
func (s *Store) Deployment() string { return s.deployment }

func (s *Store) checkAcks(acks int64) error {
	if acks >= 0 && acks < s.waitN {
		return fmt.Errorf("%w: %d of %d", errReplicas, acks, s.waitN)
	}
	return nil
}

// ticketKey names an approval ticket: {prefix}apt:{ticket}, its own key
// (and slot), so Claim writes it with a separate SET (see there).
func (s *Store) ticketKey(id string) string { return s.prefix + "apt:" + id }

// validOpID mints an op id when empty and checks the charset otherwise: the
// stored form (one kind byte + id) must stay a small listpack value.
func validOpID(id string) (string, error) {
	if id == "" {
		return idempotency.NewOpID(), nil
	}
	if len(id) > 63 {
		return "", errors.New("redisstore: op id: longer than 63 bytes")
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return "", fmt.Errorf("redisstore: op id: byte %d is not in [A-Za-z0-9_-]", i)
		}
	}
	return id, nil
}

// packRoute checks the route record's facts and writes them as the claim
// script stores them (lua/common.lua): for each fact that is not empty, its
// tag, its length (LEB128) and its bytes. The script copies them into a
// fresh record as they are, which is cheaper in Lua than splitting and
// encoding them there. The connection and tool are usually the scope's
// own: they are left out when equal to the scope's, and stored as
// emptyFact when empty where the scope's are not.
func packRoute(scope idempotency.Scope, r receipt.RouteRecord) (string, error) {
	facts := [...]struct {
		tag     byte
		name, v string
	}{
		{'c', "connection", r.Connection}, {'p', "provider", r.Provider}, {'T', "tool", r.Tool},
		{'M', "method", r.Method}, {'H', "host", r.Host}, {'P', "path", r.Path},
		{'u', "upstream tool", r.UpstreamTool},
	}
	n := 0
	for _, f := range facts {
		if err := validRouteField(f.name, f.v); err != nil {
			return "", err
		}
		n += 3 + len(f.v)
	}
	b := make([]byte, 0, n)
	for _, f := range facts {
		v := f.v
		switch f.tag {
		case 'c':
			v = scopeFact(scope.Connection, v)
		case 'T':
			v = scopeFact(scope.Tool, v)
		}
		if v == "" {
			continue
		}
		b = append(b, f.tag)
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	return string(b), nil
}

// emptyFact stores an empty connection or tool where the scope's is not
// empty; validated facts hold no control byte, so it is never a real one.
const emptyFact = "\x00"

// scopeFact is what a connection or tool fact is stored as: nothing when
// it is the scope's own.
func scopeFact(scoped, v string) string {
	switch {
	case v == scoped:
		return ""
	case v == "":
		return emptyFact
	}
	return v
}

// unscopeFact reads a connection or tool fact back.
func unscopeFact(scoped, v string, stored bool) string {
	switch {
	case !stored:
		return scoped
	case v == emptyFact:
		return ""
	}
	return v
}

func validRouteField(field, v string) error {
	if len(v) > 128 {
		return fmt.Errorf("redisstore: route %s: longer than 128 bytes", field)
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' || c == 0x7f {
			return fmt.Errorf("redisstore: route %s: control byte at %d", field, i)
		}
	}
	return nil
}

// checkRetention refuses an attempt that could outlive its record: a
// reservation sets the record's TTL to UnknownRetention and renewals keep
// it, so an attempt of timeout (renewed up to it, plus one lease) must end
// before the record does, or the record expires under it and a new claim
// restarts the fencing tokens (docs/DESIGN.md, "The record and its lifecycle").
func (s *Store) checkRetention(timeout time.Duration) error {
	if s.uretentionD <= timeout+s.leaseD {
		return fmt.Errorf("%w: unknown retention %v, attempt timeout %v, lease %v", idempotency.ErrRetentionTooShort, s.uretentionD, timeout, s.leaseD)
	}
	return nil
}

// incarnationArg reads a request's incarnation (16 lowercase hex digits, or
// empty) into the bytes the scripts compare.
func incarnationArg(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	b, err := hex.DecodeString(v)
	if err != nil || len(b) != 8 || hex.EncodeToString(b) != v {
		return "", errors.New("malformed incarnation: want 16 lowercase hex digits")
	}
	return string(b), nil
}

// deadline reads a deadline in milliseconds; 0 (a record made before
// attempt deadlines) is the zero time.
func deadline(m rueidis.RedisMessage) (time.Time, error) {
	v, err := m.AsInt64()
	if err != nil || v == 0 {
		return time.Time{}, err
	}
	return msTime(v), nil
}

// neverSent finalizes a reservation that is not to be used (its WAIT fell
// short) as never sent, so that it does not burn the slot. Best effort: if
// it fails, the slot reads unknown once the lease lapses, as after a crash.
func (s *Store) neverSent(ctx context.Context, key, bucket, member string, token int, inc string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.readTimeout)
	defer cancel()
	args := scriptargs.FinalizeSpec.Argv(&scriptargs.Finalize{Token: token, State: stateCodes[effectspec.Unknown],
		Op: opTag('f', idempotency.NewOpID()), TTL: s.uretention, Never: true, Member: member, Incarnation: inc,
		Result: encodeResult(nil, s.maxResult)})
	s.execKeys(ctx, s.sc.finalize, []string{key, bucket}, args, false)
}

// runStatus is execKeys followed by status: a failure of either is an
// [unavailableError] of op.
func (s *Store) runStatus(ctx context.Context, op string, sc *script, keys, args []string, wait bool) (arr []rueidis.RedisMessage, acks int64, st idempotency.Status, err error) {
	arr, acks, err = s.execKeys(ctx, sc, keys, args, wait)
	if err == nil {
		st, err = status(arr)
	}
	if err != nil {
		return nil, 0, "", opError(op, err)
	}
	return arr, acks, st, nil
}

// storedRecord decodes the record a finalize or settle script answers after
// its status: a short or unreadable reply is an [unavailableError] of op.
func storedRecord(op string, scope idempotency.Scope, key idempotency.Key, arr []rueidis.RedisMessage) (idempotency.Record, error) {
	if len(arr) < 2 {
		return idempotency.Record{}, opError(op, errors.New("short "+op+" reply"))
	}
	raw, err := arr[1].ToString()
	if err != nil {
		return idempotency.Record{}, opError(op, err)
	}
	rec, err := decodeStored(scope, key, raw, 0, schemaVersion)
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: %s: %w", op, err)
	}
	return rec, nil
}
