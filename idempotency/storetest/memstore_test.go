package storetest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/lifecycle"
	"github.com/obol-gateway/obol/internal/storelimits"
	"github.com/obol-gateway/obol/internal/storereply"
	"github.com/obol-gateway/obol/receipt"
)

// memStore is a minimal in-memory Store on a fake clock, built on package
// lifecycle: it validates and translates requests, keeps the records and
// runs the lifecycle's transitions on them. It exists to prove that the
// suite is satisfiable and, with a mutant (memMutants), that it
// catches broken stores: a mutant replaces one of its rules or hooks,
// never a branch in here.
type memStore struct {
	cfg   Config
	rules rules
	hooks hooks

	mu      sync.Mutex
	now     time.Time
	recs    map[string]*memRec
	tickets map[string]string // ticket id -> storage key
}

// rules are the transitions the store runs: lifecycle's, unless a mutant
// broke one.
type rules struct {
	claim    func(*lifecycle.Record, lifecycle.ClaimRequest, int64) (lifecycle.Result, lifecycle.Write)
	reserve  func(*lifecycle.Record, lifecycle.ReserveRequest, int64) (lifecycle.Result, lifecycle.Write)
	renew    func(*lifecycle.Record, lifecycle.RenewRequest, int64) (lifecycle.Result, lifecycle.Write)
	finalize func(*lifecycle.Record, lifecycle.FinalizeRequest, int64) (lifecycle.Result, lifecycle.Write)
	giveback func(*lifecycle.Record, lifecycle.GiveBackRequest, int64) (lifecycle.Result, lifecycle.Write)
	decide   func(*lifecycle.Record, lifecycle.DecideRequest, int64) (lifecycle.Result, lifecycle.Write)
	settle   func(*lifecycle.Record, lifecycle.SettleRequest, int64) (lifecycle.Result, lifecycle.Write)
}

// hooks are what the store does around the rules (validation, keys,
// listing), each a point a mutant may replace.
type hooks struct {
	retention   func(m *memStore, timeout time.Duration) error
	binding     func(b effectspec.BindingKind) (effectspec.BindingKind, bool)
	vendorKey   func(req idempotency.ClaimRequest) idempotency.Key
	beforeWrite func(m *memStore) // between reading a missing record and writing it, under the lock
	replay      func(rec *idempotency.Record, req idempotency.ClaimRequest)
	validate    func(req idempotency.SettleRequest) error
	pageLimit   func(req idempotency.ListRequest) int
	listState   func(m *memStore, r *lifecycle.Record) effectspec.Outcome
	settleAfter func(m *memStore, r *lifecycle.Record) time.Time
}

type memRec struct {
	rec   *lifecycle.Record
	scope idempotency.Scope
	key   idempotency.Key
	route receipt.RouteRecord
}

func newMemStore(cfg Config, mutant string) *memStore {
	m := &memStore{cfg: cfg, now: time.Unix(1_700_000_000, 0).UTC(), recs: map[string]*memRec{}, tickets: map[string]string{},
		rules: rules{claim: lifecycle.Claim, reserve: lifecycle.Reserve, renew: lifecycle.Renew, finalize: lifecycle.Finalize,
			giveback: lifecycle.GiveBack, decide: lifecycle.Decide, settle: lifecycle.Settle},
		hooks: hooks{retention: checkRetention, binding: knownBinding, vendorKey: vendorKey, beforeWrite: func(*memStore) {},
			replay: func(*idempotency.Record, idempotency.ClaimRequest) {}, validate: idempotency.SettleRequest.Validate,
			pageLimit: func(req idempotency.ListRequest) int { return storelimits.PageLimit(req.Limit) }, listState: viewState, settleAfter: settleAfter}}
	if mutant != "" {
		mutate, ok := memMutants[mutant]
		if !ok {
			panic("storetest: no mutant " + mutant)
		}
		mutate(m)
	}
	return m
}

func (m *memStore) advance(d time.Duration) { m.mu.Lock(); m.now = m.now.Add(d); m.mu.Unlock() }

func (m *memStore) ms() int64 { return m.now.UnixMilli() }

func (m *memStore) Lease() time.Duration { return m.cfg.Lease }

// checkRetention refuses an attempt that could outlive its record.
func checkRetention(m *memStore, timeout time.Duration) error {
	if m.cfg.UnknownRetention <= timeout+m.cfg.Lease {
		return idempotency.ErrRetentionTooShort
	}
	return nil
}

// memDeployment is the memStore fleet's deployment id.
const memDeployment = "0123456789abcdef0123456789abcdef"

func vendorKey(req idempotency.ClaimRequest) idempotency.Key {
	return idempotency.VendorKey(memDeployment, req.Scope, req.Key, req.RequestHash)
}

var hashRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// bindings are the bindings a record may hold. A binding not listed is
// refused, as redisstore refuses one it has no record code for.
var bindings = map[effectspec.BindingKind]bool{
	effectspec.BindingHeader: true, effectspec.BindingBodyPointer: true, effectspec.BindingUnsupported: true,
	effectspec.BindingInProcess: true, effectspec.BindingInProcessKeyed: true, effectspec.BindingMeta: true,
}

func knownBinding(b effectspec.BindingKind) (effectspec.BindingKind, bool) { return b, bindings[b] }

func ms(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

// parseKey reads a vendor key as the record keeps it (empty: none).
func parseKey(s string) idempotency.Key {
	k, _ := idempotency.ParseKey(s)
	return k
}

// opTag is an op id as the record keeps it: kinds never collide, and a
// call without one gets a fresh one.
func opTag(kind, id string) string {
	if id == "" {
		id = idempotency.NewOpID()
	}
	return kind + ":" + id
}

// get returns the live record at k, dropping an expired one.
func (m *memStore) get(k string) *memRec {
	r := m.recs[k]
	if r != nil && lifecycle.Expire(r.rec, m.ms()) == nil {
		delete(m.recs, k)
		return nil
	}
	return r
}

// cur is the lifecycle record of r, nil for none.
func cur(r *memRec) *lifecycle.Record {
	if r == nil {
		return nil
	}
	return r.rec
}

// put stores a step's write.
func (m *memStore) put(k string, r *memRec, w lifecycle.Write) {
	if w.Record != nil {
		r.rec = w.Record
		m.recs[k] = r
	}
}

// viewState is a record's state as readers see it: a lapsed lease reads
// unknown.
func viewState(m *memStore, r *lifecycle.Record) effectspec.Outcome {
	if lifecycle.Lapsed(r, m.ms()) {
		return effectspec.Unknown
	}
	return r.State
}

// settleAfter is when a record whose attempt may still run at its gateway
// can be settled (zero: now).
func settleAfter(m *memStore, r *lifecycle.Record) time.Time {
	if d := max(r.AttemptDeadline, r.EarlierDeadline); d != 0 && m.ms() <= d+m.cfg.Lease.Milliseconds() {
		return ms(d + m.cfg.Lease.Milliseconds())
	}
	return time.Time{}
}

// record is the Store's view of r (lr: the lifecycle record to show).
func (m *memStore) record(r *memRec, lr *lifecycle.Record, body bool) idempotency.Record {
	rec := idempotency.Record{SchemaVersion: 2, ScopeVersion: int(lr.ScopeVersion), State: viewState(m, lr), Key: r.key,
		KeySource: idempotency.KeySupplied, RequestHash: lr.RequestHash, Route: r.route,
		VendorKey: parseKey(lr.VendorKey), AttemptCount: int(lr.Attempts), SentAttempts: int(lr.Sent),
		LeaseDeadline: ms(lr.Lease), AttemptDeadline: ms(lr.AttemptDeadline), EarlierDeadline: ms(lr.EarlierDeadline), Ticket: lr.Ticket,
		Approved: lr.Approved, ApprovalDenied: lr.ApprovalDenied, CreatedAt: ms(lr.Created), UpdatedAt: ms(lr.Updated)}
	rec.Route.Fingerprint = lr.Fingerprint
	if lr.KeySource == 'm' {
		rec.KeySource = idempotency.KeyMinted
	}
	rec.Binding = lr.Binding
	if lr.Finalized {
		rec.FinalizedAt = ms(lr.Created + lr.FinalizedAfter)
		rec.UpdatedAt = rec.FinalizedAt
	}
	if res := lr.Result; res.Status != "" || res.Body != "" || res.Dropped || len(res.Headers) > 0 {
		sr := &idempotency.StoredResult{BodyDropped: res.Dropped, Header: http.Header{}}
		sr.Status, _ = strconv.Atoi(res.Status)
		if body && res.Body != "" {
			sr.Body = []byte(res.Body)
		}
		for f, v := range res.Headers {
			sr.Header[strings.TrimPrefix(f, ":")] = strings.Split(v, "\n")
		}
		rec.Result = sr
	}
	if lr.Resolution != "" {
		parts := strings.SplitN(lr.Resolution, "\x1f", 3)
		at, _ := strconv.ParseInt(parts[1], 10, 64)
		rec.Resolution = &receipt.Resolution{Outcome: rec.State, By: parts[0], At: ms(at), Note: parts[2]}
	}
	return rec
}

// result is a stored result as the record keeps it: safe headers only, a
// body over MaxResultBytes dropped.
func (m *memStore) result(res *idempotency.StoredResult) lifecycle.EncodedResult {
	if res == nil {
		return lifecycle.EncodedResult{}
	}
	out := lifecycle.EncodedResult{Dropped: res.BodyDropped, Body: string(res.Body)}
	if res.Status != 0 {
		out.Status = strconv.Itoa(res.Status)
	}
	for name, v := range res.Header {
		if idempotency.SafeHeader(name) && len(v) > 0 {
			if out.Headers == nil {
				out.Headers = map[string]string{}
			}
			out.Headers[":"+http.CanonicalHeaderKey(name)] = strings.Join(v, "\n")
		}
	}
	if len(out.Body) > m.cfg.MaxResultBytes {
		out.Body, out.Dropped = "", true
	}
	return out
}

func (m *memStore) Claim(ctx context.Context, req idempotency.ClaimRequest) (idempotency.ClaimResult, error) {
	k, err := req.Scope.StorageKey(m.cfg.Prefix, req.Key)
	if err != nil {
		return idempotency.ClaimResult{}, err
	}
	if !hashRE.MatchString(req.RequestHash) || !hashRE.MatchString(req.Route.Fingerprint) {
		return idempotency.ClaimResult{}, errors.New("memstore: malformed hash")
	}
	b, ok := m.hooks.binding(req.Binding)
	if !ok {
		return idempotency.ClaimResult{}, fmt.Errorf("memstore: claim: unknown binding %q", req.Binding)
	}
	timeout, err := storelimits.AttemptTimeout(req.Timeout)
	if err != nil {
		return idempotency.ClaimResult{}, err
	}
	window, err := storelimits.VendorWindow(req.VendorWindow)
	if err != nil {
		return idempotency.ClaimResult{}, err
	}
	maxAtt, err := storelimits.MaxAttempts(req.MaxAttempts)
	if err != nil {
		return idempotency.ClaimResult{}, err
	}
	if err := m.hooks.retention(m, timeout); err != nil {
		return idempotency.ClaimResult{}, err
	}
	q := lifecycle.ClaimRequest{ScopeVersion: idempotency.ScopeVersion, RequestHash: req.RequestHash, Binding: b,
		Fingerprint: req.Route.Fingerprint, KeySource: 's', ApprovalRequired: req.ApprovalRequired, Ticket: req.Ticket,
		Op: opTag("c", req.OpID), Lease: m.cfg.Lease.Milliseconds(), Retention: m.cfg.Retention.Milliseconds(),
		UnknownRetention: m.cfg.UnknownRetention.Milliseconds(), Timeout: timeout.Milliseconds(), Refuse: req.Refuse, NoCreate: req.NoCreate,
		Window: window.Milliseconds(), Incarnation: idempotency.NewOpID()[:16], MaxAttempts: int64(maxAtt)}
	if req.KeySource == idempotency.KeyMinted {
		q.KeySource = 'm'
	}
	if req.ApprovalRequired {
		q.NewTicket = idempotency.NewTicketID()
	}
	if b != effectspec.BindingUnsupported {
		q.VendorKey = m.hooks.vendorKey(req).String()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.get(k)
	if r == nil {
		if req.Ticket != "" && !req.Refuse {
			return idempotency.ClaimResult{}, fmt.Errorf("%w: no held record under this key", idempotency.ErrApprovalKeyMismatch)
		}
		m.hooks.beforeWrite(m)
	}
	res, w := m.rules.claim(cur(r), q, m.ms())
	if r == nil {
		r = &memRec{scope: req.Scope, key: req.Key, route: req.Route}
	}
	m.put(k, r, w)
	out := idempotency.ClaimResult{Status: idempotency.Status(res.Status), Token: int(res.Token),
		LeaseDeadline: ms(res.Lease), AttemptDeadline: ms(res.AttemptDeadline), VendorKey: parseKey(res.VendorKey),
		Incarnation: res.Incarnation, Ticket: res.Ticket, AlreadyApplied: res.Applied,
		RetryAfter: time.Duration(res.RetryAfter) * time.Millisecond, MaxAttemptsReached: res.Limit == storereply.MaxAttempts}
	switch res.Status {
	case storereply.Corrupt:
		return idempotency.ClaimResult{}, errors.New("memstore: record of an unknown state")
	case idempotency.StatusHeld:
		m.tickets[res.Ticket] = k
	case idempotency.StatusReplay:
		rec := m.record(r, res.Record, true)
		m.hooks.replay(&rec, req)
		out.Record = &rec
	}
	return out, nil
}

// GiveBack is a finalize of the claim's own token as never sent.
func (m *memStore) GiveBack(ctx context.Context, req idempotency.GiveBackRequest) error {
	k, err := req.Scope.StorageKey(m.cfg.Prefix, req.Key)
	if err != nil {
		return err
	}
	if req.Token < 1 || req.ClaimOpID == "" {
		return errors.New("memstore: give back: token < 1 or no claim op id")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.get(k)
	res, w := m.rules.giveback(cur(r), lifecycle.GiveBackRequest{Token: int64(req.Token), ClaimOp: opTag("c", req.ClaimOpID),
		Op: opTag("g", req.OpID), UnknownRetention: m.cfg.UnknownRetention.Milliseconds(), Incarnation: req.Incarnation}, m.ms())
	switch res.Status {
	case storereply.NotFound:
		return idempotency.ErrNotFound
	case storereply.GivenBack:
		m.put(k, r, w)
		return nil
	}
	return idempotency.ErrStale
}

func (m *memStore) Reserve(ctx context.Context, req idempotency.ReserveRequest) (idempotency.Reservation, error) {
	k, err := req.Scope.StorageKey(m.cfg.Prefix, req.Key)
	if err != nil {
		return idempotency.Reservation{}, err
	}
	timeout, err := storelimits.AttemptTimeout(req.Timeout)
	if err != nil {
		return idempotency.Reservation{}, err
	}
	if err := m.hooks.retention(m, timeout); err != nil {
		return idempotency.Reservation{}, err
	}
	maxAtt, err := storelimits.MaxAttempts(req.MaxAttempts)
	if err != nil {
		return idempotency.Reservation{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.get(k)
	res, w := m.rules.reserve(cur(r), lifecycle.ReserveRequest{Token: int64(req.Token), Op: opTag("r", req.OpID),
		Lease: m.cfg.Lease.Milliseconds(), UnknownRetention: m.cfg.UnknownRetention.Milliseconds(), Timeout: timeout.Milliseconds(),
		PrevNever: req.PreviousNeverSent, Incarnation: req.Incarnation, MaxAttempts: int64(maxAtt)}, m.ms())
	switch res.Status {
	case storereply.NotFound:
		return idempotency.Reservation{}, idempotency.ErrNotFound
	case storereply.Reserved:
		m.put(k, r, w)
		return idempotency.Reservation{Token: int(res.Token), LeaseDeadline: ms(res.Lease), AttemptDeadline: ms(res.AttemptDeadline),
			AlreadyApplied: res.Applied}, nil
	}
	return idempotency.Reservation{}, idempotency.ErrStale
}

func (m *memStore) Finalize(ctx context.Context, req idempotency.FinalizeRequest) (idempotency.Record, error) {
	k, err := req.Scope.StorageKey(m.cfg.Prefix, req.Key)
	if err != nil {
		return idempotency.Record{}, err
	}
	if req.NeverSent {
		if req.Outcome != "" && req.Outcome != effectspec.Unknown || req.Result != nil {
			return idempotency.Record{}, errors.New("memstore: never sent with an outcome or result")
		}
		req.Outcome = effectspec.Unknown
	}
	ttl := m.cfg.Retention
	switch req.Outcome {
	case effectspec.Accepted, effectspec.DefinitelyRejected:
	case effectspec.Unknown:
		ttl = m.cfg.UnknownRetention
	default:
		return idempotency.Record{}, fmt.Errorf("memstore: outcome %q", req.Outcome)
	}
	if req.Token < 1 {
		return idempotency.Record{}, errors.New("memstore: token < 1")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.get(k)
	res, w := m.rules.finalize(cur(r), lifecycle.FinalizeRequest{Token: int64(req.Token), State: req.Outcome,
		Op: opTag("f", req.OpID), TTL: ttl.Milliseconds(), Never: req.NeverSent, Incarnation: req.Incarnation,
		Result: m.result(req.Result)}, m.ms())
	m.put(k, r, w) // a write may come with any answer (a mutant's)
	switch res.Status {
	case storereply.NotFound:
		return idempotency.Record{}, idempotency.ErrNotFound
	case storereply.Finalized:
		return m.record(r, res.Record, false), nil
	}
	return idempotency.Record{}, idempotency.ErrStale
}

func (m *memStore) Renew(ctx context.Context, req idempotency.RenewRequest) (time.Time, error) {
	k, err := req.Scope.StorageKey(m.cfg.Prefix, req.Key)
	if err != nil {
		return time.Time{}, err
	}
	if req.Token < 1 {
		return time.Time{}, errors.New("memstore: token < 1")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.get(k)
	res, w := m.rules.renew(cur(r), lifecycle.RenewRequest{Token: int64(req.Token), Op: opTag("n", req.OpID),
		Lease: m.cfg.Lease.Milliseconds(), Incarnation: req.Incarnation}, m.ms())
	switch res.Status {
	case storereply.NotFound:
		return time.Time{}, idempotency.ErrNotFound
	case storereply.Renewed:
		m.put(k, r, w)
		return ms(res.Lease), nil
	}
	return time.Time{}, idempotency.ErrStale
}

func (m *memStore) Lookup(ctx context.Context, scope idempotency.Scope, key idempotency.Key) (idempotency.Record, error) {
	k, err := scope.StorageKey(m.cfg.Prefix, key)
	if err != nil {
		return idempotency.Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.get(k)
	if r == nil {
		return idempotency.Record{}, idempotency.ErrNotFound
	}
	return m.record(r, r.rec, true), nil
}

func (m *memStore) ticket(id string, r *memRec) idempotency.Ticket {
	tk := idempotency.Ticket{ID: id, Scope: r.scope, Key: r.key, Status: idempotency.TicketPending}
	switch {
	case r.rec.State == effectspec.Denied || r.rec.ApprovalDenied:
		tk.Status = idempotency.TicketDenied
	case r.rec.Approved:
		tk.Status = idempotency.TicketApproved
	}
	return tk
}

func (m *memStore) Ticket(ctx context.Context, id string) (idempotency.Ticket, error) {
	if !idempotency.ValidTicketID(id) {
		return idempotency.Ticket{}, errors.New("memstore: malformed ticket")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.get(m.tickets[id])
	if r == nil || r.rec.Ticket != id {
		return idempotency.Ticket{}, idempotency.ErrNotFound
	}
	return m.ticket(id, r), nil
}

func (m *memStore) Decide(ctx context.Context, req idempotency.DecideRequest) (idempotency.Ticket, error) {
	if !idempotency.ValidTicketID(req.Ticket) {
		return idempotency.Ticket{}, errors.New("memstore: malformed ticket")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := m.tickets[req.Ticket]
	r := m.get(k)
	res, w := m.rules.decide(cur(r), lifecycle.DecideRequest{Ticket: req.Ticket, Approve: req.Approve, Op: opTag("d", req.OpID),
		Retention: m.cfg.Retention.Milliseconds(), ScopeVersion: idempotency.ScopeVersion}, m.ms())
	switch res.Status {
	case storereply.NotFound:
		return idempotency.Ticket{}, idempotency.ErrNotFound
	case idempotency.StatusScopeVersionConflict:
		return idempotency.Ticket{}, idempotency.ErrScopeVersionConflict
	case storereply.Conflict:
		if res.Standing == idempotency.StatusDenied {
			return idempotency.Ticket{}, idempotency.ErrDenied
		}
		return idempotency.Ticket{}, idempotency.ErrStale
	}
	m.put(k, r, w)
	return m.ticket(req.Ticket, r), nil
}

var _ idempotency.Store = (*memStore)(nil)

// The mutants: each breaks one rule of the lifecycle (wrapping its
// transition) or one thing the store does around it (a hook), for
// TestSuiteCatchesBrokenStores.

// claimIn breaks the claim's view of its input: f may change the request
// and a copy of the record.
func claimIn(f func(c *lifecycle.Record, q *lifecycle.ClaimRequest, now int64)) func(*memStore) {
	return func(m *memStore) {
		next := m.rules.claim
		m.rules.claim = func(cur *lifecycle.Record, q lifecycle.ClaimRequest, now int64) (lifecycle.Result, lifecycle.Write) {
			c := cur.Clone()
			f(c, &q, now)
			return next(c, q, now)
		}
	}
}

// claimOut breaks the claim's answer or write.
func claimOut(f func(cur *lifecycle.Record, q lifecycle.ClaimRequest, now int64, res *lifecycle.Result, w *lifecycle.Write)) func(*memStore) {
	return func(m *memStore) {
		next := m.rules.claim
		m.rules.claim = func(cur *lifecycle.Record, q lifecycle.ClaimRequest, now int64) (lifecycle.Result, lifecycle.Write) {
			res, w := next(cur, q, now)
			f(cur, q, now, &res, &w)
			return res, w
		}
	}
}

func reserveIn(f func(c *lifecycle.Record, q *lifecycle.ReserveRequest, now int64)) func(*memStore) {
	return func(m *memStore) {
		next := m.rules.reserve
		m.rules.reserve = func(cur *lifecycle.Record, q lifecycle.ReserveRequest, now int64) (lifecycle.Result, lifecycle.Write) {
			c := cur.Clone()
			f(c, &q, now)
			return next(c, q, now)
		}
	}
}

func renewIn(f func(c *lifecycle.Record, q *lifecycle.RenewRequest, now int64)) func(*memStore) {
	return func(m *memStore) {
		next := m.rules.renew
		m.rules.renew = func(cur *lifecycle.Record, q lifecycle.RenewRequest, now int64) (lifecycle.Result, lifecycle.Write) {
			c := cur.Clone()
			f(c, &q, now)
			return next(c, q, now)
		}
	}
}

func finalizeIn(f func(c *lifecycle.Record, q *lifecycle.FinalizeRequest, now int64)) func(*memStore) {
	return func(m *memStore) {
		next := m.rules.finalize
		m.rules.finalize = func(cur *lifecycle.Record, q lifecycle.FinalizeRequest, now int64) (lifecycle.Result, lifecycle.Write) {
			c := cur.Clone()
			f(c, &q, now)
			return next(c, q, now)
		}
	}
}

func settleIn(f func(c *lifecycle.Record, q *lifecycle.SettleRequest, now int64)) func(*memStore) {
	return func(m *memStore) {
		next := m.rules.settle
		m.rules.settle = func(cur *lifecycle.Record, q lifecycle.SettleRequest, now int64) (lifecycle.Result, lifecycle.Write) {
			c := cur.Clone()
			f(c, &q, now)
			return next(c, q, now)
		}
	}
}

func givebackIn(f func(c *lifecycle.Record, q *lifecycle.GiveBackRequest)) func(*memStore) {
	return func(m *memStore) {
		next := m.rules.giveback
		m.rules.giveback = func(cur *lifecycle.Record, q lifecycle.GiveBackRequest, now int64) (lifecycle.Result, lifecycle.Write) {
			c := cur.Clone()
			f(c, &q)
			return next(c, q, now)
		}
	}
}

// both applies several mutations.
func both(fs ...func(*memStore)) func(*memStore) {
	return func(m *memStore) {
		for _, f := range fs {
			f(m)
		}
	}
}

// keepExpiry makes a write of an existing record keep its expiry.
func keepExpiry(cur *lifecycle.Record, w *lifecycle.Write) {
	if cur != nil && w.Record != nil {
		w.Record.Expires = cur.Expires
	}
}

// claimAs runs the claim of a record with binding from as if it had
// binding to, and keeps from on the record: it breaks the binding's rules
// and nothing else.
func claimAs(from, to effectspec.BindingKind) func(*memStore) {
	return func(m *memStore) {
		next := m.rules.claim
		m.rules.claim = func(cur *lifecycle.Record, q lifecycle.ClaimRequest, now int64) (lifecycle.Result, lifecycle.Write) {
			if cur == nil || cur.Binding != from || q.Binding != from {
				return next(cur, q, now)
			}
			c := cur.Clone()
			c.Binding, q.Binding = to, to
			res, w := next(c, q, now)
			for _, r := range []*lifecycle.Record{res.Record, w.Record} {
				if r != nil {
					r.Binding = from
				}
			}
			return res, w
		}
	}
}

func lapsedOrUnknown(c *lifecycle.Record, now int64) bool {
	return c != nil && (c.State == effectspec.Unknown || lifecycle.Lapsed(c, now))
}

var memMutants = map[string]func(*memStore){
	"leak-token": claimOut(func(cur *lifecycle.Record, _ lifecycle.ClaimRequest, _ int64, res *lifecycle.Result, _ *lifecycle.Write) {
		if cur != nil && res.Status != idempotency.StatusClaimed {
			res.Token = cur.Attempts
		}
	}),
	"ignore-hash": claimIn(func(c *lifecycle.Record, q *lifecycle.ClaimRequest, _ int64) {
		if c != nil {
			q.RequestHash = c.RequestHash
		}
	}),
	"no-cas-finalize": finalizeIn(func(c *lifecycle.Record, q *lifecycle.FinalizeRequest, _ int64) {
		if c != nil {
			q.Token, q.Incarnation = c.Attempts, ""
			if c.State != effectspec.InProgress {
				c.State, c.Finalized = effectspec.Unknown, false
			}
		}
	}),
	"three-attempts": reserveIn(func(c *lifecycle.Record, _ *lifecycle.ReserveRequest, _ int64) {
		if c != nil {
			c.Cycle = min(c.Cycle, 1)
		}
	}),
	"no-opid": claimIn(func(_ *lifecycle.Record, q *lifecycle.ClaimRequest, _ int64) { q.Op = opTag("c", "") }),
	"lease-never-expires": claimIn(func(c *lifecycle.Record, _ *lifecycle.ClaimRequest, now int64) {
		if c != nil && c.State == effectspec.InProgress {
			c.Lease = max(c.Lease, now+1)
		}
	}),
	"no-retention-refresh": func(m *memStore) {
		claimOut(func(cur *lifecycle.Record, _ lifecycle.ClaimRequest, _ int64, _ *lifecycle.Result, w *lifecycle.Write) {
			keepExpiry(cur, w)
		})(m)
		next := m.rules.finalize
		m.rules.finalize = func(cur *lifecycle.Record, q lifecycle.FinalizeRequest, now int64) (lifecycle.Result, lifecycle.Write) {
			res, w := next(cur, q, now)
			keepExpiry(cur, &w)
			return res, w
		}
		decide := m.rules.decide
		m.rules.decide = func(cur *lifecycle.Record, q lifecycle.DecideRequest, now int64) (lifecycle.Result, lifecycle.Write) {
			res, w := decide(cur, q, now)
			keepExpiry(cur, &w)
			return res, w
		}
	},
	"client-key-to-vendor": func(m *memStore) {
		m.hooks.vendorKey = func(req idempotency.ClaimRequest) idempotency.Key { return req.Key }
	},
	"conflict-on-final": func(m *memStore) {
		next := m.rules.claim
		m.rules.claim = func(cur *lifecycle.Record, q lifecycle.ClaimRequest, now int64) (lifecycle.Result, lifecycle.Write) {
			if cur != nil && cur.State.Final() && (cur.Binding != q.Binding || cur.Fingerprint != q.Fingerprint) {
				return lifecycle.Result{Status: idempotency.StatusDestinationConflict}, lifecycle.Write{}
			}
			return next(cur, q, now)
		}
	},
	"replay-current-route": func(m *memStore) {
		m.hooks.replay = func(rec *idempotency.Record, req idempotency.ClaimRequest) {
			rec.Route, rec.Binding = req.Route, req.Binding
		}
	},
	"redispatch-other-route": claimIn(func(c *lifecycle.Record, q *lifecycle.ClaimRequest, now int64) {
		if lapsedOrUnknown(c, now) && c.Sent > 0 {
			q.Binding, q.Fingerprint = c.Binding, c.Fingerprint
		}
	}),
	"never-sent-other-route": claimIn(func(c *lifecycle.Record, q *lifecycle.ClaimRequest, now int64) {
		if lapsedOrUnknown(c, now) && c.Sent == 0 {
			q.Binding, q.Fingerprint = c.Binding, c.Fingerprint
		}
	}),
	"never-sent-burns":     finalizeIn(func(_ *lifecycle.Record, q *lifecycle.FinalizeRequest, _ int64) { q.Never = false }),
	"reserve-keeps-unsent": reserveIn(func(_ *lifecycle.Record, q *lifecycle.ReserveRequest, _ int64) { q.PrevNever = false }),
	"token-restart": claimIn(func(c *lifecycle.Record, _ *lifecycle.ClaimRequest, now int64) {
		if lapsedOrUnknown(c, now) && c.Sent == 0 {
			c.Attempts = 0
		}
	}),
	"never-sent-no-cas": func(m *memStore) {
		next := m.rules.finalize
		m.rules.finalize = func(cur *lifecycle.Record, q lifecycle.FinalizeRequest, now int64) (lifecycle.Result, lifecycle.Write) {
			res, w := next(cur, q, now)
			if q.Never && cur != nil && cur.Sent > 0 && res.Status == storereply.Stale {
				c := cur.Clone()
				c.Sent--
				w = lifecycle.Write{Record: c}
			}
			return res, w
		}
	},
	"renew-revives": renewIn(func(c *lifecycle.Record, _ *lifecycle.RenewRequest, now int64) {
		if c != nil && c.State == effectspec.InProgress && c.Lease <= now {
			c.Lease = now + 1
		}
	}),
	"renew-past-deadline": func(m *memStore) {
		next := m.rules.renew
		m.rules.renew = func(cur *lifecycle.Record, q lifecycle.RenewRequest, now int64) (lifecycle.Result, lifecycle.Write) {
			res, w := next(cur, q, now)
			if res.Status == storereply.Renewed && w.Record != nil {
				w.Record.Lease = max(cur.Lease, now+q.Lease)
				res.Lease = w.Record.Lease
			}
			return res, w
		}
	},
	"renew-any-token": renewIn(func(c *lifecycle.Record, q *lifecycle.RenewRequest, _ int64) {
		if c != nil {
			q.Token = c.Attempts
		}
	}),
	"refuse-writes": claimIn(func(c *lifecycle.Record, q *lifecycle.ClaimRequest, _ int64) {
		if c == nil {
			q.Refuse = false
		}
	}),
	"refuse-ignored": claimIn(func(c *lifecycle.Record, q *lifecycle.ClaimRequest, _ int64) {
		if c != nil {
			q.Refuse = false
		}
	}),
	"nocreate-ignored": claimIn(func(c *lifecycle.Record, q *lifecycle.ClaimRequest, _ int64) {
		q.NoCreate = false
	}),
	"nocreate-refuses-existing": func(m *memStore) {
		next := m.rules.claim
		m.rules.claim = func(cur *lifecycle.Record, q lifecycle.ClaimRequest, now int64) (lifecycle.Result, lifecycle.Write) {
			if q.NoCreate {
				return lifecycle.Result{Status: idempotency.StatusNoRecord}, lifecycle.Write{}
			}
			return next(cur, q, now)
		}
	},
	"reservation-retention": func(m *memStore) {
		both(claimIn(func(_ *lifecycle.Record, q *lifecycle.ClaimRequest, _ int64) {
			q.UnknownRetention = m.cfg.Retention.Milliseconds()
		}),
			reserveIn(func(_ *lifecycle.Record, q *lifecycle.ReserveRequest, _ int64) {
				q.UnknownRetention = m.cfg.Retention.Milliseconds()
			}))(m)
	},
	"unknown-retention": func(m *memStore) {
		finalizeIn(func(_ *lifecycle.Record, q *lifecycle.FinalizeRequest, _ int64) {
			if q.State == effectspec.Unknown {
				q.TTL = m.cfg.Retention.Milliseconds()
			}
		})(m)
	},
	"expiry-finalize-stale": finalizeIn(func(c *lifecycle.Record, _ *lifecycle.FinalizeRequest, _ int64) {
		if c != nil && c.State == effectspec.Unknown {
			c.Finalized = true
		}
	}),
	"settle-any-state": settleIn(func(c *lifecycle.Record, _ *lifecycle.SettleRequest, now int64) {
		if c != nil && !lapsedOrUnknown(c, now) {
			c.State = effectspec.Unknown
		}
	}),
	"settle-no-cas": settleIn(func(c *lifecycle.Record, q *lifecycle.SettleRequest, _ int64) {
		if c != nil {
			q.Attempts = c.Attempts
		}
	}),
	"settle-any-input": func(m *memStore) { m.hooks.validate = func(idempotency.SettleRequest) error { return nil } },
	"settle-shortens-ttl": func(m *memStore) {
		next := m.rules.settle
		m.rules.settle = func(cur *lifecycle.Record, q lifecycle.SettleRequest, now int64) (lifecycle.Result, lifecycle.Write) {
			res, w := next(cur, q, now)
			if w.Record != nil {
				w.Record.Expires = now + q.Retention
			}
			return res, w
		}
	},
	"list-shows-all": func(m *memStore) {
		m.hooks.listState = func(*memStore, *lifecycle.Record) effectspec.Outcome { return effectspec.Unknown }
	},
	"list-unbounded": func(m *memStore) { m.hooks.pageLimit = func(idempotency.ListRequest) int { return 1 << 30 } },
	"settle-ignores-lapsed": settleIn(func(c *lifecycle.Record, _ *lifecycle.SettleRequest, now int64) {
		if c != nil && lifecycle.Lapsed(c, now) {
			c.Lease = now + 1
		}
	}),
	"list-ignores-lapsed": func(m *memStore) {
		m.hooks.listState = func(m *memStore, r *lifecycle.Record) effectspec.Outcome {
			if r.State == effectspec.InProgress {
				return effectspec.InProgress
			}
			return viewState(m, r)
		}
	},
	"giveback-any-claim": givebackIn(func(c *lifecycle.Record, q *lifecycle.GiveBackRequest) {
		if c != nil {
			c.ClaimOp, c.ClaimToken, c.GivenBack = q.ClaimOp, q.Token, false
		}
	}),
	"giveback-after-finalize": givebackIn(func(c *lifecycle.Record, _ *lifecycle.GiveBackRequest) {
		if c != nil && c.State == effectspec.Unknown {
			c.Finalized = false
		}
	}),
	"late-claim-keeps-token": func(m *memStore) {
		next := m.rules.claim
		m.rules.claim = func(cur *lifecycle.Record, q lifecycle.ClaimRequest, now int64) (lifecycle.Result, lifecycle.Write) {
			if cur != nil && cur.ClaimOp == q.Op && cur.GivenBack {
				return lifecycle.Result{Status: idempotency.StatusClaimed, Token: cur.ClaimToken, Applied: true, VendorKey: cur.VendorKey,
					Incarnation: cur.Incarnation}, lifecycle.Write{}
			}
			return next(cur, q, now)
		}
	},
	"no-rehold": claimIn(func(c *lifecycle.Record, q *lifecycle.ClaimRequest, _ int64) {
		if c != nil && c.State != effectspec.Held {
			q.ApprovalRequired = false
		}
	}),
	"rehold-moves-state": claimOut(func(cur *lifecycle.Record, _ lifecycle.ClaimRequest, _ int64, res *lifecycle.Result, w *lifecycle.Write) {
		if cur != nil && cur.State != effectspec.Held && res.Status == idempotency.StatusHeld {
			if w.Record == nil {
				w.Record = cur.Clone()
			}
			w.Record.State = effectspec.Held
		}
	}),
	"rehold-retention": claimOut(func(cur *lifecycle.Record, q lifecycle.ClaimRequest, now int64, res *lifecycle.Result, w *lifecycle.Write) {
		if cur != nil && cur.State != effectspec.Held && res.Status == idempotency.StatusHeld {
			if w.Record == nil {
				w.Record = cur.Clone()
			}
			w.Record.Expires = now + q.Retention
		}
	}),
	"deny-finalizes": func(m *memStore) {
		next := m.rules.decide
		m.rules.decide = func(cur *lifecycle.Record, q lifecycle.DecideRequest, now int64) (lifecycle.Result, lifecycle.Write) {
			res, w := next(cur, q, now)
			if cur != nil && cur.State != effectspec.Held && res.Status == idempotency.StatusDenied && w.Record != nil {
				w.Record.State = effectspec.Denied
			}
			return res, w
		}
	},
	"window-ignored":  claimIn(func(_ *lifecycle.Record, q *lifecycle.ClaimRequest, _ int64) { q.Window = 1 << 50 }),
	"window-no-lease": claimIn(func(_ *lifecycle.Record, q *lifecycle.ClaimRequest, _ int64) { q.Window += q.Lease }),
	"window-from-created": claimIn(func(c *lifecycle.Record, _ *lifecycle.ClaimRequest, _ int64) {
		if c != nil {
			c.FirstSent = 0
		}
	}),
	"settle-running": settleIn(func(c *lifecycle.Record, _ *lifecycle.SettleRequest, _ int64) {
		if c != nil {
			c.AttemptDeadline = 0
		}
	}),
	"list-no-settle-after": func(m *memStore) {
		m.hooks.settleAfter = func(*memStore, *lifecycle.Record) time.Time { return time.Time{} }
	},
	"conflict-keeps-in-flight": claimOut(func(cur *lifecycle.Record, _ lifecycle.ClaimRequest, _ int64, res *lifecycle.Result, w *lifecycle.Write) {
		if cur != nil && cur.State == effectspec.InProgress && res.Status == idempotency.StatusDestinationConflict {
			*w = lifecycle.Write{}
		}
	}),
	"lease-past-deadline": func(m *memStore) {
		claimOut(func(_ *lifecycle.Record, q lifecycle.ClaimRequest, now int64, res *lifecycle.Result, w *lifecycle.Write) {
			if res.Status == idempotency.StatusClaimed && !res.Applied {
				w.Record.Lease, res.Lease = now+q.Lease, now+q.Lease
			}
		})(m)
	},
	"no-retention-check": func(m *memStore) { m.hooks.retention = func(*memStore, time.Duration) error { return nil } },
	"no-incarnation": both(
		reserveIn(func(_ *lifecycle.Record, q *lifecycle.ReserveRequest, _ int64) { q.Incarnation = "" }),
		renewIn(func(_ *lifecycle.Record, q *lifecycle.RenewRequest, _ int64) { q.Incarnation = "" }),
		finalizeIn(func(_ *lifecycle.Record, q *lifecycle.FinalizeRequest, _ int64) { q.Incarnation = "" }),
		givebackIn(func(_ *lifecycle.Record, q *lifecycle.GiveBackRequest) { q.Incarnation = "" })),
	"redispatch-in-process":    claimAs(effectspec.BindingInProcess, effectspec.BindingInProcessKeyed),
	"keyed-never-redispatched": claimAs(effectspec.BindingInProcessKeyed, effectspec.BindingInProcess),
	"meta-never-redispatched":  claimAs(effectspec.BindingMeta, effectspec.BindingUnsupported),
	"meta-window-ignored": claimIn(func(_ *lifecycle.Record, q *lifecycle.ClaimRequest, _ int64) {
		if q.Binding == effectspec.BindingMeta {
			q.Window = 1 << 50
		}
	}),
	// A store that keeps the route record without its upstream tool.
	"upstream-tool-dropped": func(m *memStore) {
		m.hooks.replay = func(rec *idempotency.Record, _ idempotency.ClaimRequest) { rec.Route.UpstreamTool = "" }
	},
	"keyed-window-ignored": claimIn(func(_ *lifecycle.Record, q *lifecycle.ClaimRequest, _ int64) {
		if q.Binding == effectspec.BindingInProcessKeyed {
			q.Window = 1 << 50
		}
	}),
	"in-process-as-unsupported": func(m *memStore) {
		m.hooks.binding = func(b effectspec.BindingKind) (effectspec.BindingKind, bool) {
			if b == effectspec.BindingInProcess {
				b = effectspec.BindingUnsupported
			}
			return knownBinding(b)
		}
	},
	"in-process-never-sent-burns": finalizeIn(func(c *lifecycle.Record, q *lifecycle.FinalizeRequest, _ int64) {
		if c != nil && c.Binding == effectspec.BindingInProcess {
			q.Never = false
		}
	}),
	// A slot's in-process binding declared the other way round counts as the
	// same destination.
	"in-process-keyed-alike": claimIn(func(c *lifecycle.Record, q *lifecycle.ClaimRequest, _ int64) {
		inproc := func(b effectspec.BindingKind) bool {
			return b == effectspec.BindingInProcess || b == effectspec.BindingInProcessKeyed
		}
		if c != nil && inproc(c.Binding) && inproc(q.Binding) && c.Binding != q.Binding {
			q.Binding, q.Fingerprint = c.Binding, c.Fingerprint
		}
	}),
	"racy-claim": func(m *memStore) {
		// The lost update made certain, whatever the scheduler: a claim
		// that read its key missing waits, unlocked, until another claim
		// read it missing too (or 2s), then both write.
		var missing atomic.Int32
		m.hooks.beforeWrite = func(m *memStore) {
			missing.Add(1)
			m.mu.Unlock()
			for end := time.Now().Add(2 * time.Second); missing.Load() < 2 && time.Now().Before(end); {
				time.Sleep(100 * time.Microsecond)
			}
			m.mu.Lock()
		}
	},
}
