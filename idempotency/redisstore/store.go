package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
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

// Options configure a Store. The zero value is ready to use: a zero field
// means its Default constant (options.go). New refuses, with an
// *OptionError wrapping ErrInvalidOptions, a negative duration or count and
// the other limits below; Options.Validate tells the same in advance.
type Options struct {
	// Prefix starts every key. If empty, idempotency.DefaultPrefix ("obol:").
	Prefix string
	// Retention is how long a record lives after its last change: a final
	// outcome sets it, and a held or denied record keeps it. If zero,
	// DefaultRetention (24h). It must be at least MinRetentionLeases times
	// Lease, and should
	// exceed the largest tool timeout plus Lease (docs/DESIGN.md, "EffectSpec (JSON, one object per tool)").
	// UnknownRetention must: a claim or reservation of a longer attempt is
	// refused (idempotency.ErrRetentionTooShort).
	Retention time.Duration
	// UnknownRetention is how long a record lives after a reservation or an
	// unknown outcome: a key that expires re-opens its slot, and an unknown
	// call is the one whose retry is most dangerous. A final outcome sets
	// Retention. If zero, DefaultUnknownRetention (7 days), or Retention if
	// that is longer; at least Retention.
	UnknownRetention time.Duration
	// Lease bounds one reserved attempt until its owner renews it (Renew).
	// If zero, DefaultLease (10s); at least MinLease (1ms).
	Lease time.Duration
	// MaxResultBytes caps the stored result (body plus kept headers). Over
	// it, the status and receipt are kept, the body is dropped and a replay
	// says BodyDropped; headers that alone exceed it are dropped too. Only
	// idempotency.SafeHeader headers are stored. If zero,
	// DefaultMaxResultBytes (64 KiB); at most 64 MiB, which bounds what decoding a stored (compressed) body may
	// allocate.
	MaxResultBytes int
	// WaitReplicas, if > 0, makes every reservation (a claimed Claim and a
	// Reserve) wait until that many replicas acknowledged it, on the same
	// connection, in the same round trip. If fewer do within WaitTimeout the
	// call fails with ErrReplicas: the reservation is not to be used, and
	// the store finalizes it as never sent (best effort, right after), so
	// that the next claim re-opens the slot with the next token and waits
	// again. New refuses a WaitReplicas above the replicas connected to any
	// master (ErrReplicaCount). With fewer WaitReplicas than replicas, a
	// failover may promote a replica that lacks a reservation: the slot then
	// looks free, or as before the attempt, and may be dispatched again.
	// After a failover the promoted master has no replica until one rejoins
	// (the old master, restarted, say); until then every reservation on its
	// slots fails closed with ErrReplicas. Finalizes are not WAITed: a
	// failover may roll a finalized record back to in flight, which then
	// reads unknown once its lease ends, never accepted by mistake.
	WaitReplicas int
	// WaitTimeout bounds the WAIT. If zero, DefaultWaitTimeout (1s); at least
	// MinWaitTimeout (1ms). With
	// WaitReplicas it must be at most half the lease: the WAIT is spent out of
	// the dispatch time.
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
	// ctx could wait forever on a Redis that is starting. If zero,
	// DefaultReadTimeout (5s).
	ReadTimeout time.Duration
	// DeploymentID, if set, is the fleet's deployment id, an input of every
	// vendor key (docs/DESIGN.md, "The key on the vendor hop"): 32 to 64
	// lowercase hex digits (ValidateDeploymentID). Kept stable when Redis
	// is rebuilt, it keeps the vendor keys of retried calls the same, so
	// vendors go on deduplicating them. New stores it when Redis holds
	// none and refuses to start (ErrDeploymentMismatch) when Redis holds
	// another; empty, New adopts the stored one or makes one.
	DeploymentID string
	// SkipDataLossCheck turns off the sentinels that see Redis lose data
	// (sentinel.go, generation.go): only for tests that flush Redis under a
	// store.
	SkipDataLossCheck bool
	// RequireInit makes New refuse a store that Init has not initialised
	// (ErrUninitialized: no generation sentinel) instead of initialising
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
	// earlier; after MigrationWait the TRYAGAIN is returned as an *OpError.
	// If zero, DefaultMigrationWait (5s): the move of a slot of some
	// thousands of keys at the pace of redis-cli --cluster reshard (a
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

// Store is an idempotency.Store on Redis or Redis Cluster. It is safe for
// concurrent use.
//
// Every operation is one Lua script (scripts.go) on the record that
// idempotency.Scope.StorageKey names and, for the scripts that reserve an
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
	// deploymentSet: the id is Options.DeploymentID, which an
	// acknowledged loss writes back.
	deploymentSet bool
}

// readCtx bounds a read-only call; see Options.ReadTimeout.
func (s *Store) readCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= s.readTimeout {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.readTimeout)
}

var _ idempotency.Store = (*Store)(nil)

// New checks opts and the server (maxmemory-policy on every node the
// client knows, replicas too since one may be promoted, unless
// SkipEvictionCheck; with WaitReplicas, the replicas connected to every
// master, INFO replication), loads the scripts and returns a Store. The client stays
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
			return fmt.Errorf("%w: master %s has %d connected, wait replicas is %d", ErrReplicaCount, addr, max(connected, 0), want)
		}
	}
	return nil
}

// Lease returns the configured lease (Options.Lease).
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
		return "", fmt.Errorf("%w: %s is not 32 to 64 lowercase hex digits", ErrCorruptRecord, deploymentKey(prefix))
	case configured != "" && old != configured:
		return "", fmt.Errorf("%w: %s holds %s, the configured deployment id is %s: configure the stored one (it names this fleet "+
			"in every vendor key), or use another key prefix or Redis for another fleet", ErrDeploymentMismatch, deploymentKey(prefix), old, configured)
	}
	return old, nil
}

// Deployment returns the fleet's deployment id (docs/DESIGN.md, "The key on the
// vendor hop"): made once per key prefix on a Redis deployment, by the first
// Store, and read by every later one.
func (s *Store) Deployment() string { return s.deployment }

func (s *Store) checkAcks(acks int64) error {
	if acks >= 0 && acks < s.waitN {
		return fmt.Errorf("%w: %d of %d", ErrReplicas, acks, s.waitN)
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
func packRoute(scope idempotency.Scope, r receipt.Route) (string, error) {
	facts := [...]struct {
		tag     byte
		name, v string
	}{
		{'c', "connection", r.Connection}, {'p', "provider", r.Provider}, {'T', "tool", r.Tool},
		{'M', "method", r.Method}, {'H', "host", r.Host}, {'P', "path", r.Path},
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
	if arr, err = s.genReply(ctx, c.slot, c.gen, c.epoch, arr); errors.Is(err, ErrDataLost) {
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
	timeout, err := idempotency.AttemptTimeout(req.Timeout)
	if err != nil {
		return claimCall{}, nil, fmt.Errorf("redisstore: claim: %w", err)
	}
	window, err := idempotency.VendorWindow(req.VendorWindow)
	if err != nil {
		return claimCall{}, nil, fmt.Errorf("redisstore: claim: vendor window: %w", err)
	}
	maxAtt, err := idempotency.MaxAttempts(req.MaxAttempts)
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
	st, err := arr[0].ToString()
	if err != nil {
		return idempotency.ClaimResult{}, err
	}
	res := idempotency.ClaimResult{Status: idempotency.ClaimStatus(st)}
	applied := func(i int) bool {
		if len(arr) <= i {
			return false
		}
		v, err := arr[i].AsInt64()
		return err == nil && v == 1
	}
	switch res.Status {
	case idempotency.StatusClaimed:
		if len(arr) < 3 {
			return res, errors.New("short claim reply")
		}
		n, err1 := arr[1].AsInt64()
		l, err2 := arr[2].AsInt64()
		if err := errors.Join(err1, err2); err != nil {
			return res, err
		}
		res.Token, res.LeaseDeadline, res.AlreadyApplied = int(n), time.UnixMilli(l).UTC(), applied(3)
		if len(arr) > 5 {
			if res.AttemptDeadline, err = deadline(arr[5]); err != nil {
				return res, err
			}
		}
		if len(arr) > 6 {
			inc, err := arr[6].ToString()
			if err != nil {
				return res, err
			}
			res.Incarnation = hex.EncodeToString([]byte(inc))
		}
		if len(arr) > 4 {
			vk, err := arr[4].ToString()
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
			why, err := arr[3].ToString()
			if err != nil {
				return res, err
			}
			switch why {
			case "max_attempts":
				res.MaxAttemptsReached = true
			case "backoff":
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

// newIncarnation makes the nonce a record made by a claim gets (field i):
// 8 bytes from crypto/rand.
func newIncarnation() string {
	var b [8]byte
	rand.Read(b[:])
	return string(b[:])
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

// ticketValue is the ticket key's JSON: what Ticket needs to find the record.
type ticketValue struct {
	Workspace  string `json:"w"`
	Connection string `json:"c,omitempty"`
	Tool       string `json:"t"`
	Key        string `json:"k"`
	Record     string `json:"r"`
}

func (s *Store) writeTicket(ctx context.Context, id string, scope idempotency.Scope, key idempotency.Key, recordKey string) error {
	v, err := json.Marshal(ticketValue{scope.Workspace, scope.Connection, scope.Tool, key.String(), recordKey})
	if err != nil {
		return err
	}
	return s.client.Do(ctx, s.client.B().Set().Key(s.ticketKey(id)).Value(string(v)).PxMilliseconds(s.retentionMS).Build()).Error()
}

// Reserve reserves attempt Token+1, the one immediate second attempt of a
// cycle, in one script (WAITed as a claim, see Options.WaitReplicas). It
// extends the work, so it needs a live lease.
func (s *Store) Reserve(ctx context.Context, req idempotency.ReserveRequest) (idempotency.Reservation, error) {
	key, err := req.Scope.StorageKey(s.prefix, req.Key)
	if err != nil {
		return idempotency.Reservation{}, fmt.Errorf("redisstore: reserve: %w", err)
	}
	if req.Token < 1 {
		return idempotency.Reservation{}, fmt.Errorf("redisstore: reserve: token %d: must be at least 1", req.Token)
	}
	timeout, err := idempotency.AttemptTimeout(req.Timeout)
	if err != nil {
		return idempotency.Reservation{}, fmt.Errorf("redisstore: reserve: %w", err)
	}
	if err := s.checkRetention(timeout); err != nil {
		return idempotency.Reservation{}, fmt.Errorf("redisstore: reserve: %w", err)
	}
	inc, err := incarnationArg(req.Incarnation)
	if err != nil {
		return idempotency.Reservation{}, fmt.Errorf("redisstore: reserve: %w", err)
	}
	maxAtt, err := idempotency.MaxAttempts(req.MaxAttempts)
	if err != nil {
		return idempotency.Reservation{}, fmt.Errorf("redisstore: reserve: %w", err)
	}
	op, bucket, member, err := s.opEntry(req.OpID, req.Scope, req.Key, key)
	if err != nil {
		return idempotency.Reservation{}, err
	}
	slot := keySlot(key)
	epoch, gen := s.genArg(slot)
	args := scriptargs.ReserveSpec.Argv(&scriptargs.Reserve{Token: req.Token, Op: opTag('r', op), Lease: s.lease, URetention: s.uretention,
		Timeout: int(timeout.Milliseconds()), PrevNever: req.PreviousNeverSent, Member: member, Incarnation: inc, MaxAttempts: maxAtt,
		Gen: gen})
	arr, acks, err := s.execKeys(ctx, s.sc.reserve, []string{key, bucket, s.genKeyOf(slot)}, args, true)
	if err == nil {
		if arr, err = s.genReply(ctx, slot, gen, epoch, arr); errors.Is(err, ErrDataLost) {
			return idempotency.Reservation{}, fmt.Errorf("redisstore: reserve: %w", err)
		}
	}
	var st string
	if err == nil {
		st, err = status(arr)
	}
	if err != nil {
		return idempotency.Reservation{}, opError("reserve", err)
	}
	switch st {
	case "not_found":
		return idempotency.Reservation{}, fmt.Errorf("redisstore: reserve: %w", idempotency.ErrNotFound)
	case "stale":
		return idempotency.Reservation{}, fmt.Errorf("redisstore: reserve: token %d is not the in-flight attempt: %w", req.Token, idempotency.ErrStale)
	case "lease_expired":
		return idempotency.Reservation{}, fmt.Errorf("redisstore: reserve: the lease of attempt %d has expired: %w", req.Token, idempotency.ErrStale)
	case "cycle_exhausted":
		return idempotency.Reservation{}, fmt.Errorf("redisstore: reserve: this cycle already had two attempts: %w", idempotency.ErrStale)
	case "max_attempts":
		return idempotency.Reservation{}, fmt.Errorf("redisstore: reserve: the slot's attempts reached max_attempts %d: %w", maxAtt, idempotency.ErrStale)
	case "reserved":
		if len(arr) < 4 {
			return idempotency.Reservation{}, opError("reserve", errors.New("short reserve reply"))
		}
		n, err1 := arr[1].AsInt64()
		l, err2 := arr[2].AsInt64()
		e, err3 := deadline(arr[3])
		if err := errors.Join(err1, err2, err3); err != nil {
			return idempotency.Reservation{}, opError("reserve", err)
		}
		if err := s.checkAcks(acks); err != nil {
			s.neverSent(ctx, key, bucket, member, int(n), inc)
			return idempotency.Reservation{}, opError("reserve", err)
		}
		return idempotency.Reservation{Token: int(n), LeaseDeadline: msTime(l), AttemptDeadline: e, AlreadyApplied: len(arr) > 4}, nil
	}
	return idempotency.Reservation{}, opError("reserve", fmt.Errorf("unexpected reply %q", st))
}

// Renew extends the lease of attempt Token, up to its attempt deadline, in
// one script; it never shortens a lease, and needs a live one. It keeps its
// op id in a field of its own, so renewals never hide a re-sent claim or
// reserve from its op id. It is not WAITed: a renewal lost in a failover
// only shortens the lease.
func (s *Store) Renew(ctx context.Context, req idempotency.RenewRequest) (time.Time, error) {
	key, err := req.Scope.StorageKey(s.prefix, req.Key)
	if err != nil {
		return time.Time{}, fmt.Errorf("redisstore: renew: %w", err)
	}
	if req.Token < 1 {
		return time.Time{}, fmt.Errorf("redisstore: renew: token %d: must be at least 1", req.Token)
	}
	op, err := validOpID(req.OpID)
	if err != nil {
		return time.Time{}, err
	}
	inc, err := incarnationArg(req.Incarnation)
	if err != nil {
		return time.Time{}, fmt.Errorf("redisstore: renew: %w", err)
	}
	arr, _, err := s.exec(ctx, s.sc.renew, key, scriptargs.RenewSpec.Argv(&scriptargs.Renew{Token: req.Token, Op: opTag('l', op), Lease: s.lease, Incarnation: inc}), false)
	if err != nil {
		return time.Time{}, opError("renew", err)
	}
	st, err := status(arr)
	if err != nil {
		return time.Time{}, opError("renew", err)
	}
	switch st {
	case "not_found":
		return time.Time{}, fmt.Errorf("redisstore: renew: %w", idempotency.ErrNotFound)
	case "stale":
		return time.Time{}, fmt.Errorf("redisstore: renew: token %d is not the in-flight attempt: %w", req.Token, idempotency.ErrStale)
	case "lease_expired":
		return time.Time{}, fmt.Errorf("redisstore: renew: the lease of attempt %d has lapsed: %w", req.Token, idempotency.ErrStale)
	case "renewed":
		if len(arr) < 2 {
			return time.Time{}, opError("renew", errors.New("short renew reply"))
		}
		l, err := arr[1].AsInt64()
		if err != nil {
			return time.Time{}, opError("renew", err)
		}
		return msTime(l), nil
	}
	return time.Time{}, opError("renew", fmt.Errorf("unexpected reply %q", st))
}

func status(arr []rueidis.RedisMessage) (string, error) {
	if len(arr) == 0 {
		return "", errors.New("empty script reply")
	}
	return arr[0].ToString()
}

// runStatus is execKeys followed by status: a failure of either is an
// [OpError] of op.
func (s *Store) runStatus(ctx context.Context, op string, sc *script, keys, args []string, wait bool) (arr []rueidis.RedisMessage, acks int64, st string, err error) {
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
// its status: a short or unreadable reply is an [OpError] of op.
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
// left) below n, and Lookup reports effectspec.Unknown with SentAttempts. On a
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
	case "not_found":
		return idempotency.Record{}, fmt.Errorf("redisstore: finalize: %w", idempotency.ErrNotFound)
	case "stale":
		return idempotency.Record{}, fmt.Errorf("redisstore: finalize: token %d is not the in-flight attempt: %w", req.Token, idempotency.ErrStale)
	case "finalized":
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
	if st == "not_found" {
		return idempotency.Record{}, fmt.Errorf("redisstore: lookup: %w", idempotency.ErrNotFound)
	}
	if st != "found" || len(arr) < 3 {
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

// resolve reads a ticket key.
func (s *Store) resolve(ctx context.Context, op, id string) (ticketValue, idempotency.Key, error) {
	if !idempotency.ValidTicketID(id) {
		return ticketValue{}, idempotency.Key{}, fmt.Errorf("redisstore: %s: malformed ticket id", op)
	}
	raw, err := s.client.Do(ctx, s.client.B().Get().Key(s.ticketKey(id)).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return ticketValue{}, idempotency.Key{}, fmt.Errorf("redisstore: %s: ticket: %w", op, idempotency.ErrNotFound)
	}
	if err != nil {
		return ticketValue{}, idempotency.Key{}, opError(op, err)
	}
	var tv ticketValue
	if err := json.Unmarshal([]byte(raw), &tv); err != nil {
		return ticketValue{}, idempotency.Key{}, fmt.Errorf("redisstore: %s: %w: ticket", op, ErrCorruptRecord)
	}
	k, err := idempotency.ParseKey(tv.Key)
	if err != nil {
		return ticketValue{}, idempotency.Key{}, fmt.Errorf("redisstore: %s: %w: ticket key", op, ErrCorruptRecord)
	}
	// The record key is derived again, so that a ticket can only ever point at
	// the record of its own scope and key under this prefix.
	rk, err := idempotency.Scope{Workspace: tv.Workspace, Connection: tv.Connection, Tool: tv.Tool}.StorageKey(s.prefix, k)
	if err != nil || rk != tv.Record {
		return ticketValue{}, idempotency.Key{}, fmt.Errorf("redisstore: %s: %w: ticket scope", op, ErrCorruptRecord)
	}
	return tv, k, nil
}

func (tv ticketValue) scope() idempotency.Scope {
	return idempotency.Scope{Workspace: tv.Workspace, Connection: tv.Connection, Tool: tv.Tool}
}

func (tv ticketValue) ticket(id string, k idempotency.Key, st idempotency.TicketStatus) idempotency.Ticket {
	return idempotency.Ticket{
		ID:     id,
		Scope:  idempotency.Scope{Workspace: tv.Workspace, Connection: tv.Connection, Tool: tv.Tool},
		Key:    k,
		Status: st,
	}
}

// Ticket resolves an approval ticket and reads its decision from the record.
func (s *Store) Ticket(ctx context.Context, id string) (idempotency.Ticket, error) {
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	tv, k, err := s.resolve(ctx, "ticket", id)
	if err != nil {
		return idempotency.Ticket{}, err
	}
	rec, err := s.Lookup(ctx, tv.scope(), k)
	if errors.Is(err, idempotency.ErrNotFound) || err == nil && rec.Ticket != id {
		return idempotency.Ticket{}, fmt.Errorf("redisstore: ticket: record: %w", idempotency.ErrNotFound)
	}
	if err != nil {
		return idempotency.Ticket{}, opError("ticket", err)
	}
	status := idempotency.TicketPending
	switch {
	case rec.State == effectspec.Denied || rec.ApprovalDenied:
		status = idempotency.TicketDenied
	case rec.Approved:
		status = idempotency.TicketApproved
	}
	t := tv.ticket(id, k, status)
	t.KeySource = rec.KeySource
	return t, nil
}

// Decide approves or denies a held call. The first decision is final:
// repeating it answers the ticket; approving a denied ticket is ErrDenied,
// denying an approved one ErrStale. Decide also restarts the ticket key's
// retention. An approved ticket of a held record dispatches only through a
// claim that presents it; a record that a claim held again in another
// state (lua/claim.lua) keeps that state and its TTL, and its approval
// lets every claim that would dispatch it do so.
func (s *Store) Decide(ctx context.Context, req idempotency.DecideRequest) (idempotency.Ticket, error) {
	op, err := validOpID(req.OpID)
	if err != nil {
		return idempotency.Ticket{}, err
	}
	tv, k, err := s.resolve(ctx, "decide", req.Ticket)
	if err != nil {
		return idempotency.Ticket{}, err
	}
	bucket, member, err := s.indexEntry(tv.scope(), k, tv.Record)
	if err != nil {
		return idempotency.Ticket{}, err
	}
	arr, _, st, err := s.runStatus(ctx, "decide", s.sc.decide, []string{tv.Record, bucket, s.pendingOf(tv.scope().Workspace, tv.Record)},
		scriptargs.DecideSpec.Argv(&scriptargs.Decide{Ticket: req.Ticket, Approve: req.Approve, Op: opTag('d', op),
			Retention: s.retention, Member: member, ScopeVersion: scopeVersion}), false)
	if err != nil {
		return idempotency.Ticket{}, err
	}
	var ts idempotency.TicketStatus
	switch st {
	case "not_found":
		return idempotency.Ticket{}, fmt.Errorf("redisstore: decide: record: %w", idempotency.ErrNotFound)
	case "scope_version_conflict":
		return idempotency.Ticket{}, fmt.Errorf("redisstore: decide: %w", idempotency.ErrScopeVersionConflict)
	case "approved":
		ts = idempotency.TicketApproved
	case "denied":
		ts = idempotency.TicketDenied
	case "conflict":
		standing := ""
		if len(arr) > 1 {
			standing, _ = arr[1].ToString()
		}
		if standing == "denied" {
			return idempotency.Ticket{}, fmt.Errorf("redisstore: decide: the ticket was already denied: %w", idempotency.ErrDenied)
		}
		return idempotency.Ticket{}, fmt.Errorf("redisstore: decide: the ticket was already approved: %w", idempotency.ErrStale)
	default:
		return idempotency.Ticket{}, opError("decide", fmt.Errorf("unexpected reply %q", st))
	}
	// The record's retention restarted; keep its ticket resolvable as long.
	if err := s.client.Do(ctx, s.client.B().Pexpire().Key(s.ticketKey(req.Ticket)).Milliseconds(s.retentionMS).Build()).Error(); err != nil {
		return idempotency.Ticket{}, opError("decide", err)
	}
	return tv.ticket(req.Ticket, k, ts), nil
}
