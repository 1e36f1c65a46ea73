package storetest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

// memStore is a minimal in-memory Store on a fake clock. It exists to prove
// that the suite is satisfiable and, with a mutant set, that it catches
// broken stores.
type memStore struct {
	cfg    Config
	mutant string

	mu      sync.Mutex
	now     time.Time
	recs    map[string]*memRec
	tickets map[string]string // ticket id -> storage key
}

type memRec struct {
	rec        idempotency.Record
	scope      idempotency.Scope
	expires    time.Time
	cycleStart int  // attempt count when the current cycle began
	denied     bool // the ticket was denied
	settled    bool // finalized (not turned unknown by the lease-expiry path)
	ops        map[string]any
	renewOp    string
	// claimOp and claimToken name the claim that made the current cycle
	// and the token it reserved (redisstore's field K).
	claimOp    string
	claimToken int
	givenBack  bool // the claim's token was given back

	// firstSent is when the first attempt that may have left was reserved:
	// the vendor's window is measured from it.
	firstSent time.Time
	inc       string // incarnation: made with the record
}

func newMemStore(cfg Config, mutant string) *memStore {
	return &memStore{cfg: cfg, mutant: mutant, now: time.Unix(1_700_000_000, 0).UTC(),
		recs: map[string]*memRec{}, tickets: map[string]string{}}
}

func (m *memStore) advance(d time.Duration) { m.mu.Lock(); m.now = m.now.Add(d); m.mu.Unlock() }

// checkRetention refuses an attempt that could outlive its record.
func (m *memStore) checkRetention(timeout time.Duration) error {
	if m.cfg.UnknownRetention <= timeout+m.cfg.Lease && m.mutant != "no-retention-check" {
		return idempotency.ErrRetentionTooShort
	}
	return nil
}

// incMatches is the incarnation fence: an empty one is not checked.
func (m *memStore) incMatches(r *memRec, inc string) bool {
	return inc == "" || inc == r.inc || m.mutant == "no-incarnation"
}

// memDeployment is the memStore fleet's deployment id.
const memDeployment = "0123456789abcdef0123456789abcdef"

var hashRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// get returns the live record at k, dropping an expired one.
func (m *memStore) get(k string) *memRec {
	r := m.recs[k]
	if r != nil && !m.now.Before(r.expires) {
		delete(m.recs, k)
		return nil
	}
	return r
}

func (m *memStore) touch(r *memRec) { m.touchFor(r, m.cfg.Retention) }

func (m *memStore) touchUnknown(r *memRec) {
	d := m.cfg.UnknownRetention
	if m.mutant == "reservation-retention" {
		d = m.cfg.Retention
	}
	m.touchFor(r, d)
}

func (m *memStore) touchFor(r *memRec, d time.Duration) {
	r.rec.UpdatedAt = m.now
	if m.mutant == "no-retention-refresh" && !r.rec.CreatedAt.IsZero() {
		return
	}
	r.expires = m.now.Add(d)
}

func (m *memStore) Lease() time.Duration { return m.cfg.Lease }

func (m *memStore) expired(r *memRec) bool {
	return r.rec.State == idempotency.StateInFlight && !m.now.Before(r.rec.LeaseDeadline) && m.mutant != "lease-never-expires"
}

func (m *memStore) reserveNext(r *memRec, timeout time.Duration) {
	if r.rec.SentAttempts == 0 {
		r.firstSent = m.now
	}
	r.rec.State = idempotency.StateInFlight
	r.rec.AttemptCount++
	r.rec.SentAttempts++
	r.rec.LeaseDeadline = m.now.Add(m.cfg.Lease)
	r.rec.AttemptDeadline = m.now.Add(timeout)
	if r.rec.LeaseDeadline.After(r.rec.AttemptDeadline) && m.mutant != "lease-past-deadline" {
		r.rec.LeaseDeadline = r.rec.AttemptDeadline
	}
	r.settled = false
	r.renewOp = ""
	m.touchUnknown(r)
}

func (m *memStore) Claim(ctx context.Context, req idempotency.ClaimRequest) (idempotency.ClaimResult, error) {
	k, err := req.Scope.StorageKey(m.cfg.Prefix, req.Key)
	if err != nil {
		return idempotency.ClaimResult{}, err
	}
	if !hashRE.MatchString(req.RequestHash) || !hashRE.MatchString(req.Fingerprint) {
		return idempotency.ClaimResult{}, errors.New("memstore: malformed hash")
	}
	switch req.Binding {
	case effectspec.BindingHeader, effectspec.BindingBodyPointer, effectspec.BindingUnsupported:
	default:
		return idempotency.ClaimResult{}, errors.New("memstore: unknown binding")
	}
	timeout, err := idempotency.AttemptTimeout(req.Timeout)
	if err != nil {
		return idempotency.ClaimResult{}, err
	}
	window, err := idempotency.VendorWindow(req.VendorWindow)
	if err != nil {
		return idempotency.ClaimResult{}, err
	}
	if err := m.checkRetention(timeout); err != nil {
		return idempotency.ClaimResult{}, err
	}
	if req.OpID == "" {
		req.OpID = idempotency.NewOpID()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.get(k)
	if m.mutant == "racy-claim" && r == nil {
		m.mu.Unlock()
		time.Sleep(time.Millisecond)
		m.mu.Lock()
	}
	if r == nil && req.Refuse && m.mutant != "refuse-writes" {
		return idempotency.ClaimResult{Status: idempotency.StatusRefused}, nil
	}
	if r == nil {
		if req.Ticket != "" {
			return idempotency.ClaimResult{}, fmt.Errorf("%w: no held record under this key", idempotency.ErrApprovalKeyMismatch)
		}
		r = &memRec{scope: req.Scope, ops: map[string]any{}, inc: idempotency.NewOpID()[:16], rec: idempotency.Record{
			SchemaVersion: 1, ScopeVersion: idempotency.ScopeVersion, Key: req.Key, KeySource: req.KeySource,
			RequestHash: req.RequestHash, Binding: req.Binding, Route: req.Route, Fingerprint: req.Fingerprint,
		}}
		if req.Binding != effectspec.BindingUnsupported {
			r.rec.VendorKey = idempotency.VendorKey(memDeployment, req.Scope, req.Key, req.RequestHash)
			if m.mutant == "client-key-to-vendor" {
				r.rec.VendorKey = req.Key
			}
		}
		m.touch(r)
		r.rec.CreatedAt = m.now
		m.recs[k] = r
		var res idempotency.ClaimResult
		if req.ApprovalRequired {
			r.rec.State = idempotency.StateHeld
			r.rec.Ticket = idempotency.NewTicketID()
			m.tickets[r.rec.Ticket] = k
			res = idempotency.ClaimResult{Status: idempotency.StatusHeld, Ticket: r.rec.Ticket}
		} else {
			m.reserveNext(r, timeout)
			r.claimOp, r.claimToken, r.givenBack = req.OpID, r.rec.AttemptCount, false
			res = m.claimed(r)
		}
		r.ops[req.OpID] = res
		return res, nil
	}
	if prev, ok := r.ops[req.OpID].(idempotency.ClaimResult); ok && m.mutant != "no-opid" {
		// A copy of a claim that reserved answers its token only while the
		// record holds it open, and nothing after its give-back; once the
		// record moved on otherwise it is judged by the rows below, as a
		// store that remembers only the record's own claim does.
		if prev.Status != idempotency.StatusClaimed || m.holdsClaim(r, req.OpID) || m.mutant == "late-claim-keeps-token" {
			prev.AlreadyApplied = true
			return prev, nil
		}
		if r.claimOp == req.OpID && r.givenBack {
			return idempotency.ClaimResult{Status: idempotency.StatusOutcomeUnknown, AlreadyApplied: true}, nil
		}
	}
	refuse := func(s idempotency.ClaimStatus) (idempotency.ClaimResult, error) {
		res := idempotency.ClaimResult{Status: s}
		if m.mutant == "leak-token" {
			res.Token = r.rec.AttemptCount
		}
		return res, nil
	}
	if r.rec.RequestHash != req.RequestHash && m.mutant != "ignore-hash" {
		return refuse(idempotency.StatusRequestMismatch)
	}
	sameRoute := r.rec.Binding == req.Binding && r.rec.Fingerprint == req.Fingerprint
	if m.mutant == "conflict-on-final" && !sameRoute && r.rec.State.Final() {
		return refuse(idempotency.StatusDestinationConflict)
	}
	if r.rec.State.Final() {
		rec := m.copyRecord(r, true)
		if m.mutant == "replay-current-route" {
			rec.Route, rec.Fingerprint, rec.Binding = req.Route, req.Fingerprint, req.Binding
		}
		return idempotency.ClaimResult{Status: idempotency.StatusReplay, Record: &rec}, nil
	}
	if req.Refuse && m.mutant != "refuse-ignored" {
		return refuse(idempotency.StatusRefused)
	}
	live := r.rec.State == idempotency.StateInFlight && !m.expired(r)
	switch {
	case live:
		res := idempotency.ClaimResult{Status: idempotency.StatusInProgress, AttemptDeadline: r.rec.AttemptDeadline}
		if m.mutant == "leak-token" {
			res.Token = r.rec.AttemptCount
		}
		return res, nil
	case r.rec.State == idempotency.StateDenied:
		return refuse(idempotency.StatusDenied)
	case r.rec.State == idempotency.StateHeld:
		if req.Ticket == "" || req.Ticket != r.rec.Ticket || !r.rec.Approved {
			return idempotency.ClaimResult{Status: idempotency.StatusHeld, Ticket: r.rec.Ticket}, nil
		}
		if !sameRoute {
			return refuse(idempotency.StatusDestinationConflict)
		}
	default: // unknown, or in flight with a lapsed lease
		never := r.rec.SentAttempts == 0
		switch {
		case !sameRoute && !(never && m.mutant == "never-sent-other-route") && !(!never && m.mutant == "redispatch-other-route"):
			if r.rec.State == idempotency.StateInFlight && m.mutant != "conflict-keeps-in-flight" {
				// The lapsed attempt becomes unknown first.
				r.rec.State = idempotency.StateUnknown
				m.touchUnknown(r)
			}
			return refuse(idempotency.StatusDestinationConflict)
		case !never && (r.rec.Binding == effectspec.BindingUnsupported || !m.inWindow(r, window)):
			if r.rec.State == idempotency.StateInFlight {
				r.rec.State = idempotency.StateUnknown
				m.touchUnknown(r)
			}
			return refuse(idempotency.StatusOutcomeUnknown)
		case r.rec.ApprovalDenied:
			return refuse(idempotency.StatusDenied)
		case req.ApprovalRequired && !r.rec.Approved && m.mutant != "no-rehold":
			// Held again: the state, TTL and index entry stay.
			if r.rec.Ticket == "" {
				r.rec.Ticket = idempotency.NewTicketID()
				m.tickets[r.rec.Ticket] = k
			}
			if m.mutant == "rehold-moves-state" {
				r.rec.State = idempotency.StateHeld
			}
			if m.mutant == "rehold-retention" {
				m.touch(r)
			}
			return idempotency.ClaimResult{Status: idempotency.StatusHeld, Ticket: r.rec.Ticket}, nil
		}
		if m.mutant == "token-restart" && never {
			r.rec.AttemptCount = 0
		}
	}
	r.cycleStart = r.rec.AttemptCount
	r.rec.Result, r.rec.FinalizedAt = nil, time.Time{}
	m.reserveNext(r, timeout)
	r.claimOp, r.claimToken, r.givenBack = req.OpID, r.rec.AttemptCount, false
	res := m.claimed(r)
	r.ops[req.OpID] = res
	return res, nil
}

// holdsClaim reports whether the record's current cycle was made by the
// claim with op id op and still holds its token open: in flight, or turned
// unknown by the lease-expiry path without a finalize.
func (m *memStore) holdsClaim(r *memRec, op string) bool {
	open := r.rec.State == idempotency.StateInFlight || r.rec.State == idempotency.StateUnknown && !r.settled
	return open && r.claimOp == op && r.claimToken == r.rec.AttemptCount
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
	if r == nil {
		return idempotency.ErrNotFound
	}
	if _, ok := r.ops[req.OpID]; ok && req.OpID != "" {
		return nil
	}
	ok := m.holdsClaim(r, req.ClaimOpID) && r.claimToken == req.Token && m.incMatches(r, req.Incarnation)
	switch m.mutant {
	case "giveback-any-claim":
		ok = req.Token == r.rec.AttemptCount && (r.rec.State == idempotency.StateInFlight || r.rec.State == idempotency.StateUnknown && !r.settled)
	case "giveback-after-finalize":
		ok = r.claimOp == req.ClaimOpID && r.claimToken == req.Token && req.Token == r.rec.AttemptCount && !r.rec.State.Final()
	}
	if !ok {
		return idempotency.ErrStale
	}
	if r.rec.SentAttempts > 0 {
		r.rec.SentAttempts--
	}
	r.settled, r.givenBack = true, true
	r.rec.State = idempotency.StateUnknown
	r.rec.LeaseDeadline, r.rec.AttemptDeadline = time.Time{}, time.Time{}
	r.rec.FinalizedAt = m.now
	m.touchUnknown(r)
	if req.OpID != "" {
		r.ops[req.OpID] = true
	}
	return nil
}

// inWindow reports whether the vendor still remembers the key of r's first
// attempt that may have left when a new attempt's lease ends.
func (m *memStore) inWindow(r *memRec, window time.Duration) bool {
	if m.mutant == "window-ignored" {
		return true
	}
	first := r.firstSent
	if m.mutant == "window-from-created" {
		first = r.rec.CreatedAt
	}
	if m.mutant == "window-no-lease" {
		return m.now.Before(first.Add(window))
	}
	return m.now.Add(m.cfg.Lease).Before(first.Add(window))
}

func (m *memStore) claimed(r *memRec) idempotency.ClaimResult {
	return idempotency.ClaimResult{Status: idempotency.StatusClaimed, Token: r.rec.AttemptCount, LeaseDeadline: r.rec.LeaseDeadline,
		AttemptDeadline: r.rec.AttemptDeadline, VendorKey: r.rec.VendorKey, Incarnation: r.inc}
}

func (m *memStore) copyRecord(r *memRec, body bool) idempotency.Record {
	rec := r.rec
	if m.expired(r) {
		rec.State = idempotency.StateUnknown
	}
	if rec.Result != nil {
		res := *rec.Result
		res.Header = res.Header.Clone()
		if body {
			res.Body = slices.Clone(res.Body)
		} else {
			res.Body = nil
		}
		rec.Result = &res
	}
	return rec
}

func (m *memStore) Reserve(ctx context.Context, req idempotency.ReserveRequest) (idempotency.Reservation, error) {
	k, err := req.Scope.StorageKey(m.cfg.Prefix, req.Key)
	if err != nil {
		return idempotency.Reservation{}, err
	}
	timeout, err := idempotency.AttemptTimeout(req.Timeout)
	if err != nil {
		return idempotency.Reservation{}, err
	}
	if err := m.checkRetention(timeout); err != nil {
		return idempotency.Reservation{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.get(k)
	if r == nil {
		return idempotency.Reservation{}, idempotency.ErrNotFound
	}
	if prev, ok := r.ops[req.OpID].(idempotency.Reservation); ok && req.OpID != "" {
		prev.AlreadyApplied = true
		return prev, nil
	}
	if r.rec.State != idempotency.StateInFlight || m.expired(r) || req.Token != r.rec.AttemptCount || !m.incMatches(r, req.Incarnation) ||
		(r.rec.AttemptCount-r.cycleStart >= 2 && m.mutant != "three-attempts") {
		return idempotency.Reservation{}, idempotency.ErrStale
	}
	m.reserveNext(r, timeout)
	if req.PreviousNeverSent && m.mutant != "reserve-keeps-unsent" {
		r.rec.SentAttempts--
		if r.rec.SentAttempts == 1 {
			r.firstSent = m.now // the first that may leave
		}
	}
	res := idempotency.Reservation{Token: r.rec.AttemptCount, LeaseDeadline: r.rec.LeaseDeadline, AttemptDeadline: r.rec.AttemptDeadline}
	if req.OpID != "" {
		r.ops[req.OpID] = res
	}
	return res, nil
}

func (m *memStore) Finalize(ctx context.Context, req idempotency.FinalizeRequest) (idempotency.Record, error) {
	k, err := req.Scope.StorageKey(m.cfg.Prefix, req.Key)
	if err != nil {
		return idempotency.Record{}, err
	}
	if req.NeverSent {
		if req.Outcome != "" && req.Outcome != idempotency.StateUnknown || req.Result != nil {
			return idempotency.Record{}, errors.New("memstore: never sent with an outcome or result")
		}
		req.Outcome = idempotency.StateUnknown
	}
	switch req.Outcome {
	case idempotency.StateAccepted, idempotency.StateDefinitelyRejected, idempotency.StateUnknown:
	default:
		return idempotency.Record{}, fmt.Errorf("memstore: outcome %q", req.Outcome)
	}
	if req.Token < 1 {
		return idempotency.Record{}, errors.New("memstore: token < 1")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.get(k)
	if r == nil {
		return idempotency.Record{}, idempotency.ErrNotFound
	}
	if _, ok := r.ops[req.OpID]; ok && req.OpID != "" {
		return m.copyRecord(r, false), nil
	}
	if req.NeverSent && m.mutant == "never-sent-no-cas" && r.rec.SentAttempts > 0 {
		r.rec.SentAttempts--
	}
	open := r.rec.State == idempotency.StateInFlight ||
		r.rec.State == idempotency.StateUnknown && !r.settled && m.mutant != "expiry-finalize-stale"
	if m.mutant != "no-cas-finalize" && (!open || req.Token != r.rec.AttemptCount || !m.incMatches(r, req.Incarnation)) {
		return idempotency.Record{}, idempotency.ErrStale
	}
	if req.NeverSent && r.rec.State == idempotency.StateInFlight && m.mutant != "never-sent-burns" {
		r.rec.SentAttempts--
	}
	r.settled = true
	r.rec.LeaseDeadline, r.rec.AttemptDeadline = time.Time{}, time.Time{}
	r.rec.State = req.Outcome
	r.rec.FinalizedAt = m.now
	r.rec.Result = nil
	if req.Result != nil {
		res := idempotency.StoredResult{Status: req.Result.Status, Header: http.Header{}, Body: slices.Clone(req.Result.Body)}
		for name, v := range req.Result.Header {
			if idempotency.SafeHeader(name) {
				res.Header[name] = slices.Clone(v)
			}
		}
		if len(res.Body) > m.cfg.MaxResultBytes {
			res.Body, res.BodyDropped = nil, true
		}
		r.rec.Result = &res
	}
	if req.Outcome == idempotency.StateUnknown && m.mutant != "unknown-retention" {
		m.touchUnknown(r)
	} else {
		m.touch(r)
	}
	if req.OpID != "" {
		r.ops[req.OpID] = true
	}
	return m.copyRecord(r, false), nil
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
	if r == nil || !m.incMatches(r, req.Incarnation) {
		return time.Time{}, idempotency.ErrNotFound
	}
	if r.rec.State != idempotency.StateInFlight || req.Token != r.rec.AttemptCount && m.mutant != "renew-any-token" {
		return time.Time{}, idempotency.ErrStale
	}
	if m.expired(r) && m.mutant != "renew-revives" {
		return time.Time{}, idempotency.ErrStale
	}
	if req.OpID != "" && req.OpID == r.renewOp {
		return r.rec.LeaseDeadline, nil
	}
	l := m.now.Add(m.cfg.Lease)
	if l.After(r.rec.AttemptDeadline) && m.mutant != "renew-past-deadline" {
		l = r.rec.AttemptDeadline
	}
	if l.After(r.rec.LeaseDeadline) {
		r.rec.LeaseDeadline = l
	}
	r.renewOp = req.OpID
	return r.rec.LeaseDeadline, nil
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
	return m.copyRecord(r, true), nil
}

func (m *memStore) ticket(id string, r *memRec) idempotency.Ticket {
	tk := idempotency.Ticket{ID: id, Scope: r.scope, Key: r.rec.Key, Status: idempotency.TicketPending}
	switch {
	case r.denied:
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
	if r == nil {
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
	r := m.get(m.tickets[req.Ticket])
	if r == nil {
		return idempotency.Ticket{}, idempotency.ErrNotFound
	}
	switch {
	case r.denied && req.Approve:
		return idempotency.Ticket{}, idempotency.ErrDenied
	case r.rec.Approved && !req.Approve:
		return idempotency.Ticket{}, idempotency.ErrStale
	case r.denied || r.rec.Approved:
		return m.ticket(req.Ticket, r), nil
	case r.rec.State != idempotency.StateHeld:
		// Re-held by a claim: only the approval changes.
		if req.Approve {
			r.rec.Approved = true
		} else if m.mutant == "deny-finalizes" {
			r.denied = true
			r.rec.State = idempotency.StateDenied
		} else {
			r.denied, r.rec.ApprovalDenied = true, true
		}
		return m.ticket(req.Ticket, r), nil
	case req.Approve:
		r.rec.Approved = true
	default:
		r.denied = true
		r.rec.State = idempotency.StateDenied
	}
	m.touch(r)
	return m.ticket(req.Ticket, r), nil
}

var _ idempotency.Store = (*memStore)(nil)
