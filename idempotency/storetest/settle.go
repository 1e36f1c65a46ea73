package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

// settleTests: an operator settles unknown records (docs/DESIGN.md, "The record
// and its lifecycle", "Resolving unknown"), and only those.
var settleTests = []test{
	{"FromUnknown", testSettleFromUnknown},
	{"WithResult", testSettleWithResult},
	{"LapsedLease", testSettleLapsedLease},
	{"RefusedStates", testSettleRefusedStates},
	{"Missing", testSettleMissing},
	{"AttemptCount", testSettleAttemptCount},
	{"BadInput", testSettleBadInput},
	{"KeepsTTL", testSettleKeepsTTL},
	{"Resend", testSettleResend},
	{"Concurrent", testSettleConcurrent},
	{"RacesRedispatch", testSettleRacesRedispatch},
	{"AttemptRunning", testSettleAttemptRunning},
	{"AfterDeadline", testSettleAfterDeadline},
	{"EarlierAttempt", testSettleEarlierAttempt},
}

// listTests: unknown records are listed per workspace.
var listTests = []test{
	{"OnlyUnknown", testListOnlyUnknown},
	{"LapsedLease", testListLapsedLease},
	{"Expired", testListExpired},
	{"Pages", testListPages},
	{"PageBound", testListPageBound},
	{"BadInput", testListBadInput},
}

func (e *env) settler() idempotency.Settler {
	e.t.Helper()
	st, ok := e.s.(idempotency.Settler)
	if !ok {
		e.t.Fatalf("the store (%T) is not an idempotency.Settler", e.s)
	}
	return st
}

const operator = "ops@example.test"

func settleReq(req idempotency.ClaimRequest, attempts int, outcome effectspec.Outcome) idempotency.SettleRequest {
	return idempotency.SettleRequest{Scope: req.Scope, Key: req.Key, Attempts: attempts, Outcome: outcome,
		By: operator, Note: "checked with the vendor: charge ch_1 exists"}
}

func (e *env) settleErr(s idempotency.SettleRequest) (idempotency.Record, error) {
	return e.settler().Settle(e.ctx, s)
}

func (e *env) settle(s idempotency.SettleRequest) idempotency.Record {
	e.t.Helper()
	rec, err := e.settleErr(s)
	if err != nil {
		e.t.Fatalf("Settle(%s): unexpected error: %v", s.Outcome, err)
	}
	return rec
}

// unknownCall claims an unsupported call and finalizes it unknown with a
// vendor 500.
func (e *env) unknownCall() idempotency.ClaimRequest {
	e.t.Helper()
	req := call(effectspec.BindingUnsupported)
	req.Timeout = time.Second // within the shortest retention of the suite
	r := e.claimed(req)
	e.finalize(req, r.Token, effectspec.Unknown, result(500, `{"error":"upstream"}`))
	return req
}

func wantResolution(t *testing.T, what string, rec idempotency.Record, s idempotency.SettleRequest) {
	t.Helper()
	if rec.State != s.Outcome {
		t.Fatalf("%s: state %q, want %q", what, rec.State, s.Outcome)
	}
	res := rec.Resolution
	if res == nil {
		t.Fatalf("%s: no resolution", what)
	}
	if res.Outcome != s.Outcome || res.By != s.By || res.Note != s.Note || res.At.IsZero() {
		t.Fatalf("%s: resolution %+v, want outcome %q by %q, note %q and a time", what, *res, s.Outcome, s.By, s.Note)
	}
	if rec.FinalizedAt.IsZero() {
		t.Fatalf("%s: settled record has no finalized time", what)
	}
}

func testSettleFromUnknown(t *testing.T, h Harness) {
	for _, outcome := range []effectspec.Outcome{effectspec.Accepted, effectspec.DefinitelyRejected} {
		t.Run(string(outcome), func(t *testing.T) {
			e := std(t, h)
			req := e.unknownCall()
			s := settleReq(req, 1, outcome)
			wantResolution(t, "Settle", e.settle(s), s)
			rec := e.lookup(req)
			wantResolution(t, "Lookup after settle", rec, s)
			if rec.Result != nil {
				t.Fatalf("a settle without a result keeps the unknown attempt's result (status %d)", rec.Result.Status)
			}
			for range 2 {
				r := e.claimWant(req, idempotency.StatusReplay)
				if r.Record == nil {
					t.Fatal("replay carries no record")
				}
				wantResolution(t, "replay", *r.Record, s)
				if r.Record.AttemptCount != 1 {
					t.Fatalf("replay: attempts %d, want 1", r.Record.AttemptCount)
				}
			}
			// The settled outcome is final: no second settle, no finalize.
			e.unchanged(req, "a second Settle", func() {
				if _, err := e.settleErr(settleReq(req, 1, effectspec.DefinitelyRejected)); !errors.Is(err, idempotency.ErrNotUnknown) {
					t.Fatalf("second Settle: %v, want ErrNotUnknown", err)
				}
			})
			e.stale(req, "Finalize after settle", func() error { return e.finalizeErr(req, 1, effectspec.Unknown) })
		})
	}
}

func testSettleWithResult(t *testing.T, h Harness) {
	e := std(t, h)
	req := e.unknownCall()
	s := settleReq(req, 1, effectspec.DefinitelyRejected)
	s.Result = result(402, `{"error":"card_declined"}`)
	e.settle(s)
	r := e.claimWant(req, idempotency.StatusReplay)
	wantResolution(t, "replay", *r.Record, s)
	sameResult(t, r.Record.Result, s.Result)
}

// testSettleLapsedLease: an in-flight record whose lease lapsed counts as
// unknown; once settled, its owner's late finalize is stale.
func testSettleLapsedLease(t *testing.T, h Harness) {
	e := short(t, h)
	req := call(effectspec.BindingUnsupported)
	req.Timeout = shortLease
	r := e.claimed(req)
	e.wait(2*e.cfg.Lease + margin) // past the lease, the attempt deadline and the settle margin
	s := settleReq(req, 1, effectspec.Accepted)
	e.settle(s)
	e.stale(req, "the owner's late Finalize", func() error { return e.finalizeErr(req, r.Token, effectspec.DefinitelyRejected) })
	wantResolution(t, "replay", *e.claimWant(req, idempotency.StatusReplay).Record, s)
}

func testSettleRefusedStates(t *testing.T, h Harness) {
	e := std(t, h)
	live := call(effectspec.BindingHeader)
	e.claimed(live)
	accepted := call(effectspec.BindingHeader)
	e.finalize(accepted, e.claimed(accepted).Token, effectspec.Accepted, result(201, `{}`))
	rejected := call(effectspec.BindingHeader)
	e.finalize(rejected, e.claimed(rejected).Token, effectspec.DefinitelyRejected, result(400, `{}`))
	heldReq := held(call(effectspec.BindingHeader))
	e.claimWant(heldReq, idempotency.StatusHeld)
	denied := held(call(effectspec.BindingHeader))
	tk := e.claimWant(denied, idempotency.StatusHeld).Ticket
	if _, err := e.decide(tk, false); err != nil {
		t.Fatalf("Decide(deny): %v", err)
	}
	for name, req := range map[string]idempotency.ClaimRequest{
		"live in_progress": live, "accepted": accepted, "definitely_rejected": rejected, "held": heldReq, "denied": denied,
	} {
		for _, outcome := range []effectspec.Outcome{effectspec.Accepted, effectspec.DefinitelyRejected} {
			e.unchanged(req, "Settle of a "+name+" record", func() {
				if _, err := e.settleErr(settleReq(req, 1, outcome)); !errors.Is(err, idempotency.ErrNotUnknown) {
					t.Fatalf("Settle(%s) of a %s record: %v, want ErrNotUnknown", outcome, name, err)
				}
			})
		}
	}
}

func testSettleMissing(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingUnsupported)
	if _, err := e.settleErr(settleReq(req, 1, effectspec.Accepted)); !isNotFound(err) {
		t.Fatalf("Settle of no record: %v, want ErrNotFound", err)
	}
	e.absent(req)
}

// testSettleAttemptCount: a redispatch after the operator looked makes the
// settle stale.
func testSettleAttemptCount(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingHeader)
	e.finalize(req, e.claimed(req).Token, effectspec.Unknown, nil)
	seen := e.lookup(req).AttemptCount
	r := e.claimWant(req, idempotency.StatusClaimed) // the vendor deduplicates: redispatched
	e.finalize(req, r.Token, effectspec.Unknown, nil)
	for _, n := range []int{seen, r.Token + 1} {
		e.stale(req, fmt.Sprintf("Settle with %d attempts seen", n), func() error {
			_, err := e.settleErr(settleReq(req, n, effectspec.Accepted))
			return err
		})
	}
	s := settleReq(req, r.Token, effectspec.Accepted)
	wantResolution(t, "Settle with the current count", e.settle(s), s)
}

func testSettleBadInput(t *testing.T, h Harness) {
	e := std(t, h)
	req := e.unknownCall()
	const secret = "sk_live_0123456789"
	bad := map[string]func(*idempotency.SettleRequest){
		"outcome unknown":     func(s *idempotency.SettleRequest) { s.Outcome = effectspec.Unknown },
		"outcome in_progress": func(s *idempotency.SettleRequest) { s.Outcome = effectspec.InProgress },
		"outcome denied":      func(s *idempotency.SettleRequest) { s.Outcome = effectspec.Denied },
		"outcome empty":       func(s *idempotency.SettleRequest) { s.Outcome = "" },
		"attempts 0":          func(s *idempotency.SettleRequest) { s.Attempts = 0 },
		"attempts negative":   func(s *idempotency.SettleRequest) { s.Attempts = -1 },
		"by empty":            func(s *idempotency.SettleRequest) { s.By = "" },
		"by too long":         func(s *idempotency.SettleRequest) { s.By = strings.Repeat("b", idempotency.MaxByBytes+1) },
		"by newline":          func(s *idempotency.SettleRequest) { s.By = secret + "\n" },
		"note newline":        func(s *idempotency.SettleRequest) { s.Note = secret + "\nforged: line" },
		"note NUL":            func(s *idempotency.SettleRequest) { s.Note = secret + "\x00" },
		"note unit sep":       func(s *idempotency.SettleRequest) { s.Note = secret + "\x1f1\x1fx" },
		"note DEL":            func(s *idempotency.SettleRequest) { s.Note = secret + "\x7f" },
		"note C1":             func(s *idempotency.SettleRequest) { s.Note = secret + "\u0085" },
		"note not UTF-8":      func(s *idempotency.SettleRequest) { s.Note = secret + "\xff" },
		"note bidi":           func(s *idempotency.SettleRequest) { s.Note = "paid \u202e" + secret },
		"note zero width":     func(s *idempotency.SettleRequest) { s.Note = secret + "\u200b" },
		"note BOM":            func(s *idempotency.SettleRequest) { s.Note = secret + "\ufeff" },
		"note line sep":       func(s *idempotency.SettleRequest) { s.Note = secret + "\u2028forged" },
		"note para sep":       func(s *idempotency.SettleRequest) { s.Note = secret + "\u2029forged" },
		"by bidi isolate":     func(s *idempotency.SettleRequest) { s.By = "ops\u2066" },
		"note too long":       func(s *idempotency.SettleRequest) { s.Note = secret + strings.Repeat("n", idempotency.MaxNoteBytes) },
		"status 0":            func(s *idempotency.SettleRequest) { s.Result = result(0, `{}`) },
		"status 1000":         func(s *idempotency.SettleRequest) { s.Result = result(1000, `{}`) },
	}
	for name, mut := range bad {
		s := settleReq(req, 1, effectspec.Accepted)
		mut(&s)
		e.unchanged(req, "Settle with "+name, func() {
			_, err := e.settleErr(s)
			if !errors.Is(err, idempotency.ErrInvalidRequest) {
				t.Fatalf("Settle with %s: %v, want ErrInvalidRequest", name, err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("Settle with %s: the error quotes the input: %v", name, err)
			}
		})
	}
	// The longest valid note and a non-ASCII one are accepted.
	s := settleReq(req, 1, effectspec.Accepted)
	s.Note = "vérifié " + strings.Repeat("n", idempotency.MaxNoteBytes-len("vérifié "))
	wantResolution(t, "Settle with the longest note", e.settle(s), s)
}

// testSettleKeepsTTL: settling an unknown record, which lives for
// UnknownRetention, does not cut its life to Retention.
func testSettleKeepsTTL(t *testing.T, h Harness) {
	e := newEnvUnknown(t, h, shortLease, shortRetention, longRetention)
	req := e.unknownCall()
	s := settleReq(req, 1, effectspec.Accepted)
	e.settle(s)
	e.wait(shortRetention + margin)
	wantResolution(t, "Lookup after Retention", e.lookup(req), s)
}

// testSettleResend: a settle sent again with its op id answers the settled
// record, not ErrNotUnknown.
func testSettleResend(t *testing.T, h Harness) {
	e := std(t, h)
	req := e.unknownCall()
	s := settleReq(req, 1, effectspec.Accepted)
	s.OpID = idempotency.NewOpID()
	e.settle(s)
	wantResolution(t, "re-sent Settle", e.settle(s), s)
}

func (e *env) list(workspace, cursor string, limit int) idempotency.UnknownPage {
	e.t.Helper()
	p, err := e.settler().ListUnknown(e.ctx, idempotency.ListRequest{Workspace: workspace, Cursor: cursor, Limit: limit})
	if err != nil {
		e.t.Fatalf("ListUnknown: unexpected error: %v", err)
	}
	return p
}

// listAll follows the cursor to the end and returns the keys listed.
func (e *env) listAll(workspace string, limit int) []string {
	e.t.Helper()
	var keys []string
	cursor := ""
	for range 1000 {
		p := e.list(workspace, cursor, limit)
		if len(p.Records) > limit {
			e.t.Fatalf("ListUnknown: page of %d records, limit %d", len(p.Records), limit)
		}
		for _, u := range p.Records {
			if u.Record.State != effectspec.Unknown {
				e.t.Fatalf("ListUnknown: a record in state %q", u.Record.State)
			}
			if u.Scope.Workspace != workspace {
				e.t.Fatal("ListUnknown: a record of another workspace")
			}
			keys = append(keys, u.Record.Key.String())
		}
		if p.Cursor == "" {
			return keys
		}
		cursor = p.Cursor
	}
	e.t.Fatal("ListUnknown: the cursor never ends")
	return nil
}

func wantKeys(t *testing.T, got []string, want ...idempotency.ClaimRequest) {
	t.Helper()
	w := make([]string, len(want))
	for i, r := range want {
		w[i] = r.Key.String()
	}
	slices.Sort(got)
	slices.Sort(w)
	if strings.Join(got, ",") != strings.Join(w, ",") {
		t.Fatalf("listed %v, want %v", got, w)
	}
}

func testListOnlyUnknown(t *testing.T, h Harness) {
	e := std(t, h)
	unknown := e.unknownCall()
	vendor := call(effectspec.BindingHeader)
	e.finalize(vendor, e.claimed(vendor).Token, effectspec.Unknown, nil)
	live := call(effectspec.BindingHeader)
	e.claimed(live)
	accepted := call(effectspec.BindingHeader)
	e.finalize(accepted, e.claimed(accepted).Token, effectspec.Accepted, result(201, `{}`))
	e.claimWant(held(call(effectspec.BindingHeader)), idempotency.StatusHeld)
	other := call(effectspec.BindingUnsupported)
	other.Scope.Workspace = "ws_other"
	e.finalize(other, e.claimed(other).Token, effectspec.Unknown, nil)

	p := e.list("ws_test", "", 0)
	for _, u := range p.Records {
		if u.Record.Key == unknown.Key {
			if u.Scope != unknown.Scope || u.Record.AttemptCount != 1 || u.Record.Route != unknown.Route {
				t.Fatalf("listed record: scope %+v, attempts %d, route %+v", u.Scope, u.Record.AttemptCount, u.Record.Route)
			}
			if u.Record.Result != nil && len(u.Record.Result.Body) != 0 {
				t.Fatal("a listing carries result bodies")
			}
		}
	}
	wantKeys(t, e.listAll("ws_test", 10), unknown, vendor)
	wantKeys(t, e.listAll("ws_other", 10), other)
	// Settled, a record leaves the listing.
	e.settle(settleReq(unknown, 1, effectspec.Accepted))
	wantKeys(t, e.listAll("ws_test", 10), vendor)
	// Redispatched (the vendor deduplicates), it leaves it too while in flight.
	e.claimWant(vendor, idempotency.StatusClaimed)
	wantKeys(t, e.listAll("ws_test", 10))
}

func testListLapsedLease(t *testing.T, h Harness) {
	e := short(t, h)
	req := call(effectspec.BindingUnsupported)
	e.claimed(req)
	e.expireLease()
	wantKeys(t, e.listAll("ws_test", 10), req)
	// Its attempt may still run: listed all the same, with when it becomes
	// settleable.
	for _, u := range e.list("ws_test", "", 0).Records {
		if u.Record.Key == req.Key && u.SettleAfter.IsZero() {
			t.Fatal("a lapsed lease before its attempt deadline is listed without settle_after")
		}
	}
}

// expiredRetention is the retention of testListExpired: its second record
// must outlive two listings, which on a loaded machine took 4 s against a
// real Redis (a listing reads every bucket).
const expiredRetention = 10 * time.Second

// testListExpired: a record that expired is not listed.
func testListExpired(t *testing.T, h Harness) {
	e := newEnvUnknown(t, h, shortLease, expiredRetention, expiredRetention)
	gone := e.unknownCall()
	e.wait(expiredRetention + margin)
	e.absent(gone)
	kept := e.unknownCall()
	wantKeys(t, e.listAll("ws_test", 10), kept)
	wantKeys(t, e.listAll("ws_test", 10), kept)
}

func testListPages(t *testing.T, h Harness) {
	e := std(t, h)
	var reqs []idempotency.ClaimRequest
	for range 5 {
		reqs = append(reqs, e.unknownCall())
	}
	for _, limit := range []int{1, 2, 5, 6} {
		got := e.listAll("ws_test", limit)
		seen := map[string]bool{}
		for _, k := range got {
			if seen[k] {
				t.Fatalf("limit %d: %s listed twice", limit, k)
			}
			seen[k] = true
		}
		wantKeys(t, got, reqs...)
	}
	if p := e.list("ws_test", "", 2); len(p.Records) != 2 || p.Cursor == "" {
		t.Fatalf("first page of 2: %d records, cursor %q; want 2 and a cursor", len(p.Records), p.Cursor)
	}
}

// testListPageBound: a limit of zero, or over MaxPageSize, is MaxPageSize.
func testListPageBound(t *testing.T, h Harness) {
	e := std(t, h)
	for range idempotency.MaxPageSize + 1 {
		e.unknownCall()
	}
	for _, limit := range []int{0, -1, idempotency.MaxPageSize + 1, 1 << 30} {
		p := e.list("ws_test", "", limit)
		if len(p.Records) != idempotency.MaxPageSize || p.Cursor == "" {
			t.Fatalf("limit %d: %d records, cursor %q; want %d and a cursor", limit, len(p.Records), p.Cursor, idempotency.MaxPageSize)
		}
	}
	if got := e.listAll("ws_test", idempotency.MaxPageSize); len(got) != idempotency.MaxPageSize+1 {
		t.Fatalf("listed %d records in all, want %d", len(got), idempotency.MaxPageSize+1)
	}
}

func testListBadInput(t *testing.T, h Harness) {
	e := std(t, h)
	e.unknownCall()
	for _, ws := range []string{"", "a:b", "ws{x}", strings.Repeat("w", 129)} {
		if _, err := e.settler().ListUnknown(e.ctx, idempotency.ListRequest{Workspace: ws}); err == nil {
			t.Fatalf("ListUnknown of workspace %q: no error", ws)
		}
	}
	for _, c := range []string{"not a cursor", "\x00", strings.Repeat("9", 2000)} {
		if _, err := e.settler().ListUnknown(e.ctx, idempotency.ListRequest{Workspace: "ws_test", Cursor: c}); err == nil {
			t.Fatalf("ListUnknown with a malformed cursor: no error")
		}
	}
}

// testSettleConcurrent: operators settling one record at once: exactly one
// wins, and the record holds the winner's outcome and resolution.
func testSettleConcurrent(t *testing.T, h Harness) {
	e := std(t, h)
	req := e.unknownCall()
	const n = 8
	errs := make([]error, n)
	reqs := make([]idempotency.SettleRequest, n)
	var wg sync.WaitGroup
	for i := range n {
		reqs[i] = settleReq(req, 1, []effectspec.Outcome{effectspec.Accepted, effectspec.DefinitelyRejected}[i%2])
		reqs[i].By = fmt.Sprintf("ops%d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = e.settler().Settle(e.ctx, reqs[i])
		}()
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("two settles won: ops%d and ops%d", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, idempotency.ErrNotUnknown):
			t.Fatalf("a losing settle: %v, want ErrNotUnknown", err)
		}
	}
	if winner < 0 {
		t.Fatal("no settle won")
	}
	wantResolution(t, "Lookup", e.lookup(req), reqs[winner])
}

// testSettleRacesRedispatch: a settle and a redispatch of the same unknown
// record (a vendor that deduplicates) never both apply.
func testSettleRacesRedispatch(t *testing.T, h Harness) {
	e := std(t, h)
	for range 5 {
		req := call(effectspec.BindingHeader)
		e.finalize(req, e.claimed(req).Token, effectspec.Unknown, nil)
		var claim idempotency.ClaimResult
		var claimErr, settleErr error
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); claim, claimErr = e.s.Claim(e.ctx, req) }()
		go func() {
			defer wg.Done()
			_, settleErr = e.settler().Settle(e.ctx, settleReq(req, 1, effectspec.Accepted))
		}()
		wg.Wait()
		if claimErr != nil {
			t.Fatalf("Claim: %v", claimErr)
		}
		rec := e.lookup(req)
		switch {
		case settleErr == nil && claim.Status == idempotency.StatusReplay && rec.State == effectspec.Accepted:
		// Redispatched first, the record is in flight under a live lease.
		case errors.Is(settleErr, idempotency.ErrNotUnknown) && claim.Status == idempotency.StatusClaimed && rec.State == effectspec.InProgress:
		default:
			t.Fatalf("settle %v and claim %q both ended; record %q", settleErr, claim.Status, rec.State)
		}
	}
}
