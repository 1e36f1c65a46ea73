package redisstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/lifecycle"
	"github.com/obol-gateway/obol/internal/redistest"
	"github.com/obol-gateway/obol/internal/scriptargs"
	"github.com/obol-gateway/obol/internal/storereply"
)

// The differential test: random sequences of operations run through the
// Lua scripts (as the Store sends them) and through package lifecycle,
// and every reply, every field of the stored record, its TTL and its
// unknown-index entry must agree after every step; the record's entry in
// the pending approvals index must be there while the record awaits a
// decision and gone once it is decided (pendingWant).

const (
	diffKey     = "{diff}rec"
	diffBucket  = "{diff}unk"
	diffPending = "{diff}apv"
	diffMember  = "m1"
	diffStart   = int64(1_900_000_000_000) // ms
	// diffGenKey is the slot's generation sentinel: present (runDiff
	// writes it) and never behind, an environment the lifecycle model
	// assumes (it has no generation).
	diffGenKey = "{diff}gen"
)

// diffBackend is a Redis the scripts run on, with the test's clock.
type diffBackend interface {
	client() rueidis.Client
	setNow(ms int64, advanced int64) // advanced: ms since the previous setNow
	// clockSource rewrites a script so that it reads the test's clock
	// (identity where TIME already is the test's clock).
	clockSource(src string) string
	// exactTTL: PTTL follows the test's clock exactly (miniredis); a real
	// Redis counts TTLs on its own clock too, which runs on while the test
	// steps (expire moves its TTLs by the test's advances), so its PTTL is
	// compared within realTTLSlack below the model's.
	exactTTL() bool
	// expire removes what the test's clock expired, on a Redis whose TTLs
	// do not follow it.
	expire(ctx context.Context, recordGone, entryGone bool) error
	reset(ctx context.Context) error
}

type miniBackend struct {
	mr *miniredis.Miniredis
	c  rueidis.Client
}

func newMiniBackend(tb testing.TB) *miniBackend {
	tb.Helper()
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(mr.Close)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return &miniBackend{mr: mr, c: c}
}

func (b *miniBackend) client() rueidis.Client { return b.c }
func (b *miniBackend) setNow(ms, advanced int64) {
	b.mr.SetTime(time.UnixMilli(ms))
	if advanced > 0 {
		b.mr.FastForward(time.Duration(advanced) * time.Millisecond)
	}
}
func (b *miniBackend) clockSource(src string) string            { return src }
func (b *miniBackend) exactTTL() bool                           { return true }
func (b *miniBackend) expire(context.Context, bool, bool) error { return nil }
func (b *miniBackend) reset(context.Context) error              { b.mr.FlushAll(); return nil }

// realBackend is a redis-server whose scripts read the test's clock from a
// key instead of TIME (the one change to their source: Redis has no clock
// to set).
type realBackend struct {
	c        rueidis.Client
	now      int64
	advanced int64 // ms the test's clock moved since the TTLs were last moved
}

// realTTLSlack is how far a real Redis's PTTL may lag the model's: its
// own clock's run during a sequence (milliseconds of script calls), far
// below the test's advances that a wrong TTL shows as.
const realTTLSlack = 1000

// shiftTTL moves the TTLs of the keys by ARGV[1] ms, as the test's clock
// moved: a key whose TTL runs out is deleted.
var shiftTTL = rueidis.NewLuaScript(`for _, k in ipairs(KEYS) do
  local t = redis.call('PTTL', k)
  if t > 0 then
    local n = t - tonumber(ARGV[1])
    if n <= 0 then
      redis.call('DEL', k)
    else
      redis.call('PEXPIRE', k, n)
    end
  end
end
return 1`)

const clockKey = "{diff}clock"

func (b *realBackend) client() rueidis.Client { return b.c }
func (b *realBackend) setNow(ms, advanced int64) {
	b.now = ms
	b.advanced += advanced
}
func (b *realBackend) clockSource(src string) string {
	const time = "local t = redis.call('TIME')"
	if !strings.Contains(src, time) {
		panic("lifecycle diff: the scripts no longer read TIME as expected")
	}
	return strings.Replace(src, time, "local t = redis.call('MGET', '"+clockKey+":s', '"+clockKey+":us')", 1)
}
func (b *realBackend) exactTTL() bool { return false }
func (b *realBackend) expire(ctx context.Context, recordGone, entryGone bool) error {
	if b.advanced > 0 {
		adv := b.advanced
		b.advanced = 0
		if err := shiftTTL.Exec(ctx, b.c, []string{diffKey, diffBucket, diffPending}, []string{itoa(adv)}).Error(); err != nil {
			return err
		}
	}
	if recordGone {
		if err := b.c.Do(ctx, b.c.B().Del().Key(diffKey).Build()).Error(); err != nil {
			return err
		}
	}
	if entryGone {
		return b.c.Do(ctx, b.c.B().Del().Key(diffBucket).Build()).Error()
	}
	return nil
}
func (b *realBackend) reset(ctx context.Context) error {
	b.advanced = 0
	return b.c.Do(ctx, b.c.B().Flushall().Build()).Error()
}

// writeClock stores the test's clock as TIME answers: seconds and
// microseconds.
func (b *realBackend) writeClock(ctx context.Context) error {
	return b.c.Do(ctx, b.c.B().Mset().KeyValue().KeyValue(clockKey+":s", itoa(b.now/1000)).
		KeyValue(clockKey+":us", itoa(b.now%1000*1000)).Build()).Error()
}

// diffScripts are the scripts under test, built as the Store builds them,
// optionally mutated.
type diffScripts map[string]*rueidis.Lua

func buildDiffScripts(b diffBackend, mutate func(name, src string) string) diffScripts {
	out := diffScripts{}
	for _, name := range []string{"claim", "reserve", "renew", "finalize", "giveback", "decide", "settle"} {
		src := b.clockSource(scriptSource(name, false))
		if mutate != nil {
			src = mutate(name, src)
		}
		out[name] = rueidis.NewLuaScript(src)
	}
	return out
}

// diffParams are one sequence's store settings (ms).
type diffParams struct {
	lease, timeout, window, retention, uretention, maxAttempts int64
}

// diffOp is one operation: the script and its lifecycle request.
type diffOp struct {
	script string
	claim  lifecycle.ClaimRequest
	res    lifecycle.ReserveRequest
	renew  lifecycle.RenewRequest
	fin    lifecycle.FinalizeRequest
	gb     lifecycle.GiveBackRequest
	dec    lifecycle.DecideRequest
	set    lifecycle.SettleRequest
}

func (o diffOp) String() string {
	switch o.script {
	case "claim":
		q := o.claim
		return fmt.Sprintf("claim(op=%x sv=%d rh=%x b=%s fp=%x approval=%v ticket=%q refuse=%v nocreate=%v lease=%d timeout=%d window=%d maxatt=%d)",
			q.Op, q.ScopeVersion, q.RequestHash[:2], q.Binding, q.Fingerprint[:2], q.ApprovalRequired, q.Ticket, q.Refuse, q.NoCreate,
			q.Lease, q.Timeout, q.Window, q.MaxAttempts)
	case "reserve":
		return fmt.Sprintf("reserve(op=%x token=%d prevNever=%v inc=%x maxatt=%d)", o.res.Op, o.res.Token, o.res.PrevNever,
			o.res.Incarnation, o.res.MaxAttempts)
	case "renew":
		return fmt.Sprintf("renew(op=%x token=%d inc=%x)", o.renew.Op, o.renew.Token, o.renew.Incarnation)
	case "finalize":
		return fmt.Sprintf("finalize(op=%x token=%d state=%s never=%v ttl=%d inc=%x result=%+v)", o.fin.Op, o.fin.Token, o.fin.State, o.fin.Never,
			o.fin.TTL, o.fin.Incarnation, o.fin.Result)
	case "giveback":
		return fmt.Sprintf("giveback(op=%x token=%d cop=%x inc=%x)", o.gb.Op, o.gb.Token, o.gb.ClaimOp, o.gb.Incarnation)
	case "decide":
		return fmt.Sprintf("decide(op=%x ticket=%q approve=%v sv=%d)", o.dec.Op, o.dec.Ticket, o.dec.Approve, o.dec.ScopeVersion)
	case "settle":
		return fmt.Sprintf("settle(op=%x attempts=%d state=%s sv=%d)", o.set.Op, o.set.Attempts, o.set.State, o.set.ScopeVersion)
	}
	return o.script
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func resultArgs(r lifecycle.EncodedResult) []string {
	d := "0"
	if r.Dropped {
		d = "1"
	}
	out := []string{r.Status, d, r.Body, r.Size}
	for _, k := range slices.Sorted(maps.Keys(r.Headers)) {
		out = append(out, k, r.Headers[k])
	}
	return out
}

// keys are the op's KEYS, as the Store sends them (internal/scriptargs
// names them).
func (o diffOp) keys() []string {
	names := scriptargs.Of(o.script).Keys()
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = map[string]string{"record": diffKey, "bucket": diffBucket, "pending": diffPending, "gen": diffGenKey}[n]
	}
	return out
}

// argv is the op's ARGV, encoded by internal/scriptargs as the Store does.
func (o diffOp) argv() []string {
	switch o.script {
	case "claim":
		q := o.claim
		return scriptargs.ClaimSpec.Argv(&scriptargs.Claim{ScopeVersion: itoa(q.ScopeVersion), RequestHash: q.RequestHash,
			Binding: recordBinding(q.Binding), Fingerprint: q.Fingerprint, Route: q.Route, KeySource: string(q.KeySource),
			Approval: q.ApprovalRequired, Presented: q.Ticket, Fresh: q.NewTicket, Op: q.Op, Lease: itoa(q.Lease),
			Retention: itoa(q.Retention), VendorKey: q.VendorKey, URetention: itoa(q.UnknownRetention), Timeout: int(q.Timeout),
			Refuse: q.Refuse, NoCreate: q.NoCreate, Member: diffMember, Window: int(q.Window), Incarnation: q.Incarnation,
			MaxAttempts: int(q.MaxAttempts), Gen: 1})
	case "reserve":
		q := o.res
		return scriptargs.ReserveSpec.Argv(&scriptargs.Reserve{Token: int(q.Token), Op: q.Op, Lease: itoa(q.Lease),
			URetention: itoa(q.UnknownRetention), Timeout: int(q.Timeout), PrevNever: q.PrevNever, Member: diffMember, Incarnation: q.Incarnation,
			MaxAttempts: int(q.MaxAttempts), Gen: 1})
	case "renew":
		q := o.renew
		return scriptargs.RenewSpec.Argv(&scriptargs.Renew{Token: int(q.Token), Op: q.Op, Lease: itoa(q.Lease), Incarnation: q.Incarnation})
	case "finalize":
		q := o.fin
		return scriptargs.FinalizeSpec.Argv(&scriptargs.Finalize{Token: int(q.Token), State: stateCodes[q.State], Op: q.Op, TTL: itoa(q.TTL),
			Never: q.Never, Member: diffMember, Incarnation: q.Incarnation, Result: resultArgs(q.Result)})
	case "giveback":
		q := o.gb
		return scriptargs.GiveBackSpec.Argv(&scriptargs.GiveBack{Token: int(q.Token), ClaimOp: q.ClaimOp, Op: q.Op,
			URetention: itoa(q.UnknownRetention), Member: diffMember, Incarnation: q.Incarnation})
	case "decide":
		q := o.dec
		return scriptargs.DecideSpec.Argv(&scriptargs.Decide{Ticket: q.Ticket, Approve: q.Approve, Op: q.Op,
			Retention: itoa(q.Retention), Member: diffMember, ScopeVersion: itoa(q.ScopeVersion)})
	case "settle":
		q := o.set
		return scriptargs.SettleSpec.Argv(&scriptargs.Settle{Attempts: int(q.Attempts), State: stateCodes[q.State], Op: q.Op,
			Retention: itoa(q.Retention), By: q.Who, Note: q.Note, Member: diffMember, Margin: itoa(q.Margin),
			ScopeVersion: itoa(q.ScopeVersion), Result: resultArgs(q.Result)})
	}
	panic("unknown script " + o.script)
}

// recordBinding is b's code in a record, as redisstore writes it; a
// binding no script knows ("x") is written as it is.
func recordBinding(b effectspec.BindingKind) string {
	if c, ok := bindingCode(b); ok {
		return c
	}
	return string(b)
}

// claimField is field K of r as stored: the claim's op tag, then its token in
// decimal or 'g' once given back; ” when the record has none.
func claimField(r *lifecycle.Record) string {
	switch {
	case r.ClaimOp == "":
		return ""
	case r.GivenBack:
		return r.ClaimOp + "g"
	}
	return r.ClaimOp + strconv.FormatInt(r.ClaimToken, 10)
}

// approvalField is field a of r: "1" approved, "0" denied, "" undecided.
func approvalField(r *lifecycle.Record) string {
	switch {
	case r.Approved:
		return "1"
	case r.ApprovalDenied:
		return "0"
	}
	return ""
}

// step is the op through lifecycle.
func (o diffOp) step(cur *lifecycle.Record, now int64) (lifecycle.Result, lifecycle.Write) {
	switch o.script {
	case "claim":
		return lifecycle.Claim(cur, o.claim, now)
	case "reserve":
		return lifecycle.Reserve(cur, o.res, now)
	case "renew":
		return lifecycle.Renew(cur, o.renew, now)
	case "finalize":
		return lifecycle.Finalize(cur, o.fin, now)
	case "giveback":
		return lifecycle.GiveBack(cur, o.gb, now)
	case "decide":
		return lifecycle.Decide(cur, o.dec, now)
	case "settle":
		return lifecycle.Settle(cur, o.set, now)
	}
	panic("unknown script " + o.script)
}

const recordSlot = "<record>"

// wantReply renders a lifecycle result as the script's reply, a record in
// it as recordSlot (compared field by field).
func wantReply(script string, r lifecycle.Result) []string {
	out := []string{string(r.Status)}
	applied := func() {
		if r.Applied {
			out = append(out, "1")
		}
	}
	switch r.Status {
	case idempotency.StatusClaimed:
		a := "0"
		if r.Applied {
			a = "1"
		}
		out = append(out, itoa(r.Token), itoa(r.Lease), a, r.VendorKey, itoa(r.AttemptDeadline), r.Incarnation)
	case idempotency.StatusHeld:
		out = append(out, r.Ticket)
		applied()
	case idempotency.StatusReplay:
		out = append(out, recordSlot)
	case idempotency.StatusInProgress:
		if script == "settle" {
			out = append(out, itoa(r.SettleAt), itoa(r.Now))
		} else {
			out = append(out, itoa(r.AttemptDeadline))
		}
	case idempotency.StatusOutcomeUnknown:
		switch {
		case r.Limit == storereply.Backoff:
			out = append(out, "0", string(r.Limit), itoa(r.RetryAfter))
		case r.Limit != "":
			out = append(out, "0", string(r.Limit))
		default:
			applied()
		}
	case storereply.GivenBack, storereply.Approved, idempotency.StatusDenied:
		applied()
	case storereply.Reserved:
		out = append(out, itoa(r.Token), itoa(r.Lease), itoa(r.AttemptDeadline))
		applied()
	case storereply.Renewed:
		out = append(out, itoa(r.Lease))
		applied()
	case storereply.Finalized, storereply.Settled:
		out = append(out, recordSlot)
		applied()
	case storereply.Conflict:
		out = append(out, string(r.Standing))
	}
	return out
}

// fieldsOf is a lifecycle record as the scripts decode the stored string:
// tag to value, numbers in decimal.
func fieldsOf(r *lifecycle.Record) map[string]string {
	if r == nil {
		return nil
	}
	f := map[string]string{"m": stateCodes[r.State] + string([]byte{r.KeySource}) + recordBinding(r.Binding), "w": itoa(r.ScopeVersion),
		"q": r.RequestHash, "f": r.Fingerprint, "n": itoa(r.Attempts), "C": itoa(r.Created)}
	route, _, err := unpack("\x02" + r.Route)
	if err != nil {
		panic(err)
	}
	for i := 0; i < len(route); i += 2 {
		f[route[i]] = route[i+1]
	}
	opt := func(tag, v string) {
		if v != "" {
			f[tag] = v
		}
	}
	num := func(tag string, v int64) {
		if v != 0 {
			f[tag] = itoa(v)
		}
	}
	opt("k", r.VendorKey)
	opt("i", r.Incarnation)
	if r.Sent != r.Attempts {
		f["s"] = itoa(r.Sent)
	}
	num("y", r.Cycle)
	num("l", r.Lease)
	num("e", r.AttemptDeadline)
	opt("O", r.RenewOp)
	opt("t", r.Ticket)
	opt("a", approvalField(r))
	num("U", r.Updated)
	num("W", r.FirstSent)
	num("A", r.ReservedAt)
	num("E", r.EarlierDeadline)
	if r.Finalized {
		f["F"] = itoa(r.FinalizedAfter)
	}
	if r.Result.Status != "" {
		f["x"] = itoa(mustAtoi(r.Result.Status))
	}
	if r.Result.Dropped {
		f["D"] = "1"
	}
	opt("B", r.Result.Body)
	if r.Result.Body != "" && r.Result.Size != "" {
		f["z"] = r.Result.Size
	}
	maps.Copy(f, r.Result.Headers)
	opt("o", r.Op)
	opt("K", claimField(r))
	opt("R", r.Resolution)
	return f
}

func mustAtoi(s string) int64 {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		panic(err)
	}
	return v
}

// storedFields reads a record string as the scripts store it.
func storedFields(raw string) (map[string]string, error) {
	flat, err := unpackRecord(raw)
	if err != nil {
		return nil, err
	}
	f := map[string]string{}
	for i := 0; i < len(flat); i += 2 {
		if _, dup := f[flat[i]]; dup {
			return nil, fmt.Errorf("field %q twice", flat[i])
		}
		f[flat[i]] = flat[i+1]
	}
	return f, nil
}

func diffFields(want, got map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok || g != want[k] {
			fmt.Fprintf(&b, " %s: lifecycle %q, Lua %q (present %v);", k, want[k], g, ok)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			fmt.Fprintf(&b, " %s: lifecycle none, Lua %q;", k, got[k])
		}
	}
	return b.String()
}

// diffRun is one sequence on one backend: the model's state and the
// checks after every step.
type diffRun struct {
	b       diffBackend
	scripts diffScripts
	now     int64
	cur     *lifecycle.Record
	score   int64 // the record's index entry (its expiry), 0 none
	last    lifecycle.Result
	log     []string
	seen    map[string]int // script/status[/applied]: how often each answer came

}

func (d *diffRun) fail(format string, args ...any) error {
	return fmt.Errorf("%s\nsteps:\n  %s", fmt.Sprintf(format, args...), strings.Join(d.log, "\n  "))
}

// advance moves the clock by ms, expiring what it ends.
func (d *diffRun) advance(ctx context.Context, ms int64) error {
	d.now += ms
	d.b.setNow(d.now, ms)
	gone := d.cur != nil && lifecycle.Expire(d.cur, d.now) == nil
	d.cur = lifecycle.Expire(d.cur, d.now)
	entryGone := d.score != 0 && d.now >= d.score
	if entryGone {
		d.score = 0
	}
	d.log = append(d.log, fmt.Sprintf("advance %dms (record expired %v)", ms, gone))
	return d.b.expire(ctx, gone, entryGone)
}

// apply runs o on both sides and compares them; last is lifecycle's
// answer.
func (d *diffRun) apply(ctx context.Context, o diffOp) error {
	if rb, ok := d.b.(*realBackend); ok {
		if err := rb.writeClock(ctx); err != nil {
			return err
		}
	}
	before := d.cur
	res, w := o.step(d.cur, d.now)
	d.last = res
	if w.Record != nil {
		d.cur = w.Record
	}
	switch w.Index {
	case lifecycle.IndexAdd:
		d.score = max(d.score, w.Score)
	case lifecycle.IndexRemove:
		d.score = 0
	}
	d.log = append(d.log, fmt.Sprintf("t+%d %v -> %s", d.now-diffStart, o, res.Status))
	if d.seen != nil {
		k := o.script + "/" + string(res.Status)
		if res.Applied {
			k += "/applied"
		}
		if res.Limit != "" {
			k += "/" + string(res.Limit)
		}
		d.seen[k]++
	}

	c := d.b.client()
	msgs, err := d.scripts[o.script].Exec(ctx, c, o.keys(), o.argv()).ToArray()
	if err == nil && slices.Contains(scriptargs.Of(o.script).Keys(), "gen") {
		msgs, err = genInner(msgs) // gen_wrap's reply (lua/common.lua)
	}
	if err != nil {
		if res.Status == storereply.Corrupt && strings.Contains(err.Error(), "unknown state") {
			return nil
		}
		return d.fail("%s: Lua failed: %v (lifecycle: %+v)", o.script, err, res)
	}
	got := make([]string, len(msgs))
	var gotRec string
	for i, m := range msgs {
		if v, err := m.AsInt64(); err == nil {
			got[i] = itoa(v)
			continue
		}
		s, err := m.ToString()
		if err != nil {
			return d.fail("%s: reply element %d: %v", o.script, i, err)
		}
		got[i] = s
	}
	if got, err = d.movedTail(o.script, res, got, before); err != nil {
		return err
	}
	want := wantReply(o.script, res)
	if len(got) == len(want) {
		for i := range want {
			if want[i] == recordSlot {
				gotRec, got[i] = got[i], recordSlot
			}
		}
	}
	if !slices.Equal(want, got) {
		return d.fail("%s: reply: lifecycle %q, Lua %q", o.script, want, got)
	}
	if res.Record != nil {
		g, err := storedFields(gotRec)
		if err != nil {
			return d.fail("%s: reply record: %v", o.script, err)
		}
		if diff := diffFields(fieldsOf(res.Record), g); diff != "" {
			return d.fail("%s: reply record differs:%s", o.script, diff)
		}
	}
	return d.check(ctx, before, w)
}

// movedTail checks and removes the claim reply's accounting element (the
// TTL a record had before the claim moved its expiry, for the store's
// stored-bytes count: quota.go), which lifecycle does not model: on
// claimed it is last, 0 or the TTL the record had; on outcome_unknown and
// destination_conflict after the lease-expiry path or a redispatch limit,
// it is the third, {status, 0, TTL[, limit[, retry after]]}.
func (d *diffRun) movedTail(script string, res lifecycle.Result, got []string, before *lifecycle.Record) ([]string, error) {
	if script != "claim" {
		return got, nil
	}
	var moved string
	switch {
	case res.Status == idempotency.StatusClaimed && len(got) == 8:
		got, moved = got[:7], got[7]
	case (res.Status == idempotency.StatusOutcomeUnknown || res.Status == idempotency.StatusDestinationConflict) && len(got) >= 3 && got[1] == "0":
		moved = got[2]
		if got = slices.Delete(slices.Clone(got), 2, 3); len(got) == 2 {
			got = got[:1] // no limit: lifecycle answers the bare status
		}
	default:
		return got, nil
	}
	if moved == "0" {
		return got, nil
	}
	ttl, err := strconv.ParseInt(moved, 10, 64)
	if before == nil || err != nil {
		return nil, d.fail("claim: moved %q of no record", moved)
	}
	// A real Redis counts TTLs on its own clock, not the test's: there
	// the TTL is only checked to be one.
	want := before.Expires - d.now
	if d.b.exactTTL() && ttl != want || ttl <= 0 {
		return nil, d.fail("claim: moved a record of TTL %d, lifecycle's was %d", ttl, want)
	}
	return got, nil
}

// check compares the stored record, its TTL and its index entry.
func (d *diffRun) check(ctx context.Context, before *lifecycle.Record, w lifecycle.Write) error {
	c := d.b.client()
	rs := c.DoMulti(ctx, c.B().Get().Key(diffKey).Build(), c.B().Pttl().Key(diffKey).Build(),
		c.B().Zscore().Key(diffBucket).Member(diffMember).Build(), c.B().Zscore().Key(diffPending).Member(diffMember).Build(),
		c.B().Pttl().Key(diffPending).Build())
	raw, err := rs[0].ToString()
	switch {
	case rueidis.IsRedisNil(err):
		if d.cur != nil {
			return d.fail("record: lifecycle has one, Redis none")
		}
	case err != nil:
		return d.fail("GET: %v", err)
	case d.cur == nil:
		return d.fail("record: lifecycle none, Redis has one")
	default:
		g, err := storedFields(raw)
		if err != nil {
			return d.fail("stored record: %v", err)
		}
		if diff := diffFields(fieldsOf(d.cur), g); diff != "" {
			return d.fail("stored record differs:%s", diff)
		}
		pttl, err := rs[1].AsInt64()
		if err != nil {
			return d.fail("PTTL: %v", err)
		}
		want := d.cur.Expires - d.now
		if d.b.exactTTL() && pttl != want || !d.b.exactTTL() && (pttl > want || pttl < want-realTTLSlack) {
			return d.fail("PTTL: lifecycle %d, Redis %d", want, pttl)
		}
	}
	score, err := rs[2].AsFloat64()
	switch {
	case rueidis.IsRedisNil(err):
		if d.score != 0 {
			return d.fail("index: lifecycle entry %d, Redis none", d.score)
		}
	case err != nil:
		return d.fail("ZSCORE: %v", err)
	case int64(score) != d.score:
		return d.fail("index: lifecycle %d, Redis %d", d.score, int64(score))
	}
	pscore, err := rs[3].AsFloat64()
	if err != nil && !rueidis.IsRedisNil(err) {
		return d.fail("ZSCORE pending: %v", err)
	}
	want, known := pendingWant(d.cur)
	if known && want != (err == nil) {
		return d.fail("pending approvals: want an entry %v, Redis has one %v", want, err == nil)
	}
	if known && want {
		// The entry, and its bucket, live at least as long as the record.
		if int64(pscore) < d.cur.Expires {
			return d.fail("pending approvals: entry scored %d, before the record's expiry %d", int64(pscore), d.cur.Expires)
		}
		pttl, err := rs[4].AsInt64()
		if err != nil {
			return d.fail("PTTL pending: %v", err)
		}
		if d.b.exactTTL() && pttl < d.cur.Expires-d.now {
			return d.fail("pending approvals: bucket PTTL %d, shorter than the record's %d", pttl, d.cur.Expires-d.now)
		}
	}
	return nil
}

// pendingWant is whether the pending approvals index must list cur: yes
// while it awaits a decision (a ticket, no decision, not final: what
// ListPending lists), no once it is decided. Otherwise (no record, no
// ticket) known is false: an entry of an expired record may stay until a
// hold in its bucket prunes it, and the listing drops it.
func pendingWant(cur *lifecycle.Record) (want, known bool) {
	switch {
	case cur == nil || cur.Ticket == "":
		return false, false
	case cur.Approved || cur.ApprovalDenied || cur.State == effectspec.Denied:
		return false, true
	case cur.State.Final():
		return false, false
	}
	return true, true
}

// chooser is the source of a sequence's choices: a PRNG or a fuzzer's
// bytes (which run out: then every choice is 0 and the sequence ends).
type chooser interface {
	intn(n int) int
	done() bool
}

type rngChooser struct {
	r    *rand.Rand
	left int
}

func (c *rngChooser) intn(n int) int { return c.r.IntN(n) }
func (c *rngChooser) done() bool {
	c.left--
	return c.left < 0
}

type byteChooser struct{ b []byte }

func (c *byteChooser) intn(n int) int {
	if len(c.b) == 0 || n <= 1 {
		return 0
	}
	v := int(c.b[0])
	c.b = c.b[1:]
	if n > 256 && len(c.b) > 0 {
		v = v<<8 | int(c.b[0])
		c.b = c.b[1:]
	}
	return v % n
}
func (c *byteChooser) done() bool { return len(c.b) == 0 }

// diffGen makes the operations of one sequence: mostly plausible ones
// (the owner's token and incarnation, the record's ticket), some stale,
// foreign or re-sent (a lost reply: the same op id and arguments again).
type diffGen struct {
	c       chooser
	p       diffParams
	ops     int
	sent    []diffOp
	lastInc string // the incarnation the last claimed answer named
	lastCop string // the op of the last claim that answered claimed
}

func (g *diffGen) pick(n int) int { return g.c.intn(n) }

// maxAttempts is the tool's max_attempts for one op: mostly the
// sequence's, sometimes another (a config edit between two calls).
func (g *diffGen) maxAttempts() int64 {
	if g.pick(8) == 0 {
		return 1 + int64(g.pick(4))
	}
	return g.p.maxAttempts
}

func (g *diffGen) op8() string {
	g.ops++
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(g.ops)|uint64(g.pick(1<<16))<<40)
	return string(b[:])
}

var (
	diffHashes  = []string{strings.Repeat("\x11", 32), strings.Repeat("\x12", 32)}
	diffFPs     = []string{strings.Repeat("\x21", 32), strings.Repeat("\x22", 32)}
	diffRoutes  = []string{"c\x05conn1p\x06stripeM\x04POST", "c\x05conn2H\x07api.xyzP\x03/v1u\x06create"}
	diffBinding = []effectspec.BindingKind{effectspec.BindingHeader, effectspec.BindingBodyPointer, effectspec.BindingUnsupported,
		effectspec.BindingInProcessKeyed, effectspec.BindingMeta, "x"}
)

func (g *diffGen) result() lifecycle.EncodedResult {
	var r lifecycle.EncodedResult
	if g.pick(4) > 0 {
		r.Status = []string{"200", "201", "402", "500"}[g.pick(4)]
	}
	r.Dropped = g.pick(5) == 0
	if g.pick(2) == 0 {
		r.Body = []string{`{"id":"ch_1"}`, "x", strings.Repeat("b", 40)}[g.pick(3)]
		if g.pick(3) == 0 {
			r.Size = itoa(int64(len(r.Body) + g.pick(50)))
		}
	}
	if g.pick(2) == 0 {
		r.Headers = map[string]string{}
		for range 1 + g.pick(3) {
			k := []string{"0", "3", "J", ":X-Request-Id", ":Retry-After"}[g.pick(5)]
			r.Headers[k] = []string{"", "v1", "abc"}[g.pick(3)]
		}
	}
	return r
}

// next is the sequence's next operation at cur (the model's record).
func (g *diffGen) next(cur *lifecycle.Record) diffOp {
	// A lost reply: sent again as it was, mostly the last op.
	if len(g.sent) > 0 {
		switch g.pick(12) {
		case 0, 1:
			return g.sent[len(g.sent)-1]
		case 2:
			return g.sent[g.pick(len(g.sent))]
		}
	}
	var n int64
	var ticket string
	var sv int64 = 1
	if cur != nil {
		n, ticket = cur.Attempts, cur.Ticket
	}
	token := func() int64 {
		switch g.pick(8) {
		case 0:
			return n - 1
		case 1:
			return n + 1
		}
		return n
	}
	inc := func() string {
		switch g.pick(6) {
		case 0:
			return ""
		case 1:
			return "INCother"
		}
		return g.lastInc
	}
	var o diffOp
	k := g.pick(16)
	if cur == nil && g.pick(4) > 0 {
		k = 0 // mostly a claim where there is no record
	}
	switch {
	case k < 5:
		q := lifecycle.ClaimRequest{ScopeVersion: sv, RequestHash: diffHashes[0], Binding: effectspec.BindingHeader, Fingerprint: diffFPs[0],
			Route: diffRoutes[0], KeySource: 's', Lease: g.p.lease, Retention: g.p.retention, UnknownRetention: g.p.uretention,
			Timeout: g.p.timeout, Window: g.p.window, Op: g.op8(), NewTicket: "apt_" + itoa(int64(g.ops)),
			Incarnation: "INC" + itoa(int64(g.ops)), MaxAttempts: g.maxAttempts()}
		if cur != nil {
			q.Binding = cur.Binding
		} else {
			q.Binding = diffBinding[g.pick(len(diffBinding))]
		}
		switch g.pick(24) {
		case 0:
			q.RequestHash = diffHashes[1]
		case 1:
			q.ScopeVersion = 2
		case 2:
			q.Fingerprint = diffFPs[1]
		case 3:
			q.Binding = diffBinding[g.pick(len(diffBinding))]
		case 4:
			q.Route, q.KeySource = diffRoutes[1], 'm'
		}
		if q.Binding != effectspec.BindingUnsupported {
			q.VendorKey = strings.Repeat("\x05", 16)
		}
		q.ApprovalRequired = g.pick(4) == 0
		switch g.pick(3) {
		case 0:
			q.Ticket = ticket
		case 1:
			q.Ticket = "apt_other"
		}
		q.Refuse = g.pick(10) == 0
		q.NoCreate = g.pick(6) == 0
		if g.pick(4) == 0 {
			q.Timeout = g.p.lease / 2
		}
		o = diffOp{script: "claim", claim: q}
	case k < 8:
		o = diffOp{script: "reserve", res: lifecycle.ReserveRequest{Token: token(), Op: g.op8(), Lease: g.p.lease,
			UnknownRetention: g.p.uretention, Timeout: g.p.timeout, PrevNever: g.pick(2) == 0, Incarnation: inc(),
			MaxAttempts: g.maxAttempts()}}
	case k < 10:
		o = diffOp{script: "renew", renew: lifecycle.RenewRequest{Token: token(), Op: g.op8(), Lease: g.p.lease, Incarnation: inc()}}
	case k < 12:
		q := lifecycle.FinalizeRequest{Token: token(), State: []effectspec.Outcome{effectspec.Accepted, effectspec.DefinitelyRejected,
			effectspec.Unknown}[g.pick(3)], Op: g.op8(), TTL: g.p.retention, Incarnation: inc()}
		if q.State == effectspec.Unknown {
			q.TTL = g.p.uretention
			q.Never = g.pick(2) == 0
		}
		if !q.Never {
			q.Result = g.result()
		}
		o = diffOp{script: "finalize", fin: q}
	case k < 13:
		cop := g.lastCop
		if g.pick(5) == 0 {
			cop = "COPother"
		}
		o = diffOp{script: "giveback", gb: lifecycle.GiveBackRequest{Token: token(), ClaimOp: cop, Op: g.op8(),
			UnknownRetention: g.p.uretention, Incarnation: inc()}}
	case k < 14:
		t := ticket
		if t == "" || g.pick(6) == 0 {
			t = "apt_other"
		}
		o = diffOp{script: "decide", dec: lifecycle.DecideRequest{Ticket: t, Approve: g.pick(3) > 0, Op: g.op8(),
			Retention: g.p.retention, ScopeVersion: sv + int64(min(1, g.pick(10)/9))}}
	default:
		q := lifecycle.SettleRequest{Attempts: n, State: []effectspec.Outcome{effectspec.Accepted, effectspec.DefinitelyRejected}[g.pick(2)],
			Op: g.op8(), Retention: g.p.retention, Who: "ops@x", Note: "checked", Margin: g.p.lease, ScopeVersion: sv,
			Result: g.result()}
		if g.pick(5) == 0 {
			q.Attempts--
		}
		if g.pick(10) == 0 {
			q.ScopeVersion = 2
		}
		o = diffOp{script: "settle", set: q}
	}
	g.sent = append(g.sent, o)
	return o
}

// observe learns from a step what the next ops of a plausible caller
// carry.
func (g *diffGen) observe(o diffOp, res lifecycle.Result) {
	if o.script == "claim" && res.Status == idempotency.StatusClaimed {
		g.lastInc, g.lastCop = res.Incarnation, o.claim.Op
	}
}

// advanceBy is how far the clock moves before a step.
func (g *diffGen) advanceBy(cur *lifecycle.Record, now int64) int64 {
	switch g.pick(14) {
	case 0, 1, 2, 3, 4, 5:
		return 0
	case 6:
		return 1
	case 9:
		return g.p.lease / 3
	case 10:
		return g.p.lease
	case 11:
		return g.p.timeout + g.p.lease
	case 7:
		if cur != nil && cur.Expires > now && g.pick(3) == 0 {
			return cur.Expires - now // exactly at expiry
		}
		return int64(g.pick(int(g.p.lease)))
	case 8:
		return g.p.window / 2
	}
	return int64(g.pick(3 * int(g.p.lease)))
}

// resetDiff empties the store but for the slot's generation sentinel,
// which the scripts find present and never behind (the gateway's side of
// it is tested in generation_test.go).
func resetDiff(ctx context.Context, b diffBackend) error {
	if err := b.reset(ctx); err != nil {
		return err
	}
	return b.client().Do(ctx, b.client().B().Set().Key(diffGenKey).Value("1").Build()).Error()
}

// runDiff runs one sequence from a fresh store: nil when Lua and lifecycle
// agreed on every step.
func runDiff(ctx context.Context, b diffBackend, scripts diffScripts, c chooser, p diffParams, seen map[string]int) error {
	if err := resetDiff(ctx, b); err != nil {
		return err
	}
	d := &diffRun{b: b, scripts: scripts, now: diffStart, seen: seen}
	b.setNow(d.now, 0)
	g := &diffGen{c: c, p: p}
	for !c.done() {
		if ms := g.advanceBy(d.cur, d.now); ms > 0 {
			if err := d.advance(ctx, ms); err != nil {
				return err
			}
		}
		o := g.next(d.cur)
		if err := d.apply(ctx, o); err != nil {
			return err
		}
		g.observe(o, d.last)
	}
	return nil
}

func diffParamsFor(c chooser, real bool) diffParams {
	lease := int64(1000 * (1 + c.intn(3)))
	p := diffParams{lease: lease, timeout: lease * int64(1+c.intn(6)), retention: 20_000, uretention: 60_000}
	p.window = []int64{2 * lease, 5 * lease, 30 * lease, 86_400_000}[c.intn(4)]
	p.maxAttempts = []int64{10, 1, 2, 3}[c.intn(4)]
	if real {
		// A real Redis counts TTLs on its own clock: long enough that none
		// ends during the run; the test's clock expires records itself.
		p.retention, p.uretention = 600_000, 1_800_000
	}
	return p
}

// diffSequences runs seqs sequences of steps operations; it returns the
// first disagreement, and fills seen.
func diffSequences(ctx context.Context, b diffBackend, scripts diffScripts, seqs, steps int, real bool, seen map[string]int) error {
	for seed := range seqs {
		c := &rngChooser{r: rand.New(rand.NewPCG(uint64(seed), 26)), left: steps}
		if err := runDiff(ctx, b, scripts, c, diffParamsFor(c, real), seen); err != nil {
			return fmt.Errorf("seed %d: %w", seed, err)
		}
	}
	return nil
}

// diffReached are the answers a run must have reached, so that a
// generator that drifts away from the interesting paths fails: every
// transition's success, re-send and main refusals.
var diffReached = []string{
	"claim/claimed", "claim/claimed/applied", "claim/held", "claim/held/applied", "claim/replay", "claim/in_progress",
	"claim/request_mismatch", "claim/scope_version_conflict", "claim/destination_conflict", "claim/outcome_unknown",
	"claim/outcome_unknown/applied", "claim/outcome_unknown/max_attempts", "claim/outcome_unknown/backoff",
	"claim/denied", "claim/refused", "claim/no_record",
	"reserve/reserved", "reserve/reserved/applied", "reserve/stale", "reserve/cycle_exhausted", "reserve/lease_expired",
	"reserve/not_found", "reserve/max_attempts",
	"renew/renewed", "renew/renewed/applied", "renew/stale", "renew/lease_expired", "renew/not_found",
	"finalize/finalized", "finalize/finalized/applied", "finalize/stale",
	"giveback/given_back", "giveback/given_back/applied", "giveback/stale",
	"decide/approved", "decide/denied", "decide/approved/applied", "decide/conflict", "decide/not_found",
	"settle/settled", "settle/settled/applied", "settle/in_progress", "settle/stale", "settle/not_unknown",
	"settle/scope_version_conflict",
}

func checkReached(t *testing.T, seen map[string]int) {
	t.Helper()
	for _, k := range diffReached {
		if seen[k] == 0 {
			t.Errorf("no step answered %s: the generator misses that path", k)
		}
	}
	t.Logf("answers: %v", seen)
}

// TestLuaMatchesLifecycle runs random sequences on miniredis.
func TestLuaMatchesLifecycle(t *testing.T) {
	b := newMiniBackend(t)
	seen := map[string]int{}
	scripts := buildDiffScripts(b, nil)
	if err := runDirected(t.Context(), b, scripts, false, seen); err != nil {
		t.Fatal(err)
	}
	if err := diffSequences(t.Context(), b, scripts, 120, 50, false, seen); err != nil {
		t.Fatal(err)
	}
	checkReached(t, seen)
}

// TestLuaMatchesLifecycleRealRedis runs them on a redis-server.
func TestLuaMatchesLifecycleRealRedis(t *testing.T) {
	srv := redistest.Start(t)
	b := &realBackend{c: realClient(t, srv.Addr())}
	seen := map[string]int{}
	scripts := buildDiffScripts(b, nil)
	if err := runDirected(t.Context(), b, scripts, true, seen); err != nil {
		t.Fatal(err)
	}
	if err := diffSequences(t.Context(), b, scripts, 120, 50, true, seen); err != nil {
		t.Fatal(err)
	}
	checkReached(t, seen)
}

// FuzzLuaMatchesLifecycle drives the sequences from the fuzzer's bytes.
func FuzzLuaMatchesLifecycle(f *testing.F) {
	b := newMiniBackend(f)
	scripts := buildDiffScripts(b, nil)
	for seed := range 8 {
		r := rand.New(rand.NewPCG(uint64(seed), 8))
		buf := make([]byte, 64+seed*32)
		for i := range buf {
			buf[i] = byte(r.UintN(256))
		}
		f.Add(buf)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4096 {
			return
		}
		c := &byteChooser{b: data}
		if err := runDiff(t.Context(), b, scripts, c, diffParamsFor(c, false), nil); err != nil {
			t.Fatal(err)
		}
	})
}

// diffDirected are fixed sequences for rules a random walk seldom reaches
// with the steps that tell a broken script apart: a give-back after the
// cycle's second attempt, a copy of the claim after its owner's finalize,
// a re-hold and a settle whose TTLs differ from a fresh one, the vendor's
// window to the millisecond, the redispatch limits, and a settle after a
// redispatch replaced a running attempt's deadline. Each step is an op
// or a clock advance (ms).
var diffDirected = []struct {
	name  string
	steps func(x *diffSeq) []any
}{
	{"giveback-after-second-attempt", func(x *diffSeq) []any {
		c := x.claim()
		return []any{c, 500, x.reserve(1, false), 3000, x.giveback(c, 1), x.giveback(c, 2), x.claim(), x.claimCopy(c)}
	}},
	{"claim-copy-after-finalize", func(x *diffSeq) []any {
		c := x.claim()
		return []any{c, 500, x.finalize(1, effectspec.Unknown), x.claimCopy(c), 4000, x.claimCopy(c)}
	}},
	{"claim-copy-after-accepted", func(x *diffSeq) []any {
		c := x.claim()
		return []any{c, x.finalize(1, effectspec.Accepted), x.claimCopy(c)}
	}},
	{"rehold-keeps-ttl", func(x *diffSeq) []any {
		c := x.claim()
		h := x.claim()
		h.claim.ApprovalRequired = true
		return []any{c, x.finalize(1, effectspec.Unknown), 7000, h, 3000, x.decide(h.claim.NewTicket, true)}
	}},
	{"settle-keeps-longer-ttl", func(x *diffSeq) []any {
		return []any{x.claim(), x.finalize(1, effectspec.Unknown), 6000, x.settle(1)}
	}},
	{"giveback-ttl", func(x *diffSeq) []any {
		c := x.claim()
		return []any{c, 6000, x.giveback(c, 1)}
	}},
	{"claim-copy-after-giveback", func(x *diffSeq) []any {
		// A late copy of the cycle's claim, after its token was given
		// back: applied, outcome_unknown, never a new reservation.
		c := x.claim()
		return []any{c, 500, x.giveback(c, 1), x.claimCopy(c)}
	}},
	{"window-edge", func(x *diffSeq) []any {
		// The new attempt's lease would end exactly at the window's end:
		// outside it.
		return []any{x.claim(), x.finalize(1, effectspec.Unknown), x.p.window - x.p.lease, x.claim()}
	}},
	{"window-edge-minus-one", func(x *diffSeq) []any {
		return []any{x.claim(), x.finalize(1, effectspec.Unknown), x.p.window - x.p.lease - 1, x.claim()}
	}},
	{"backoff-and-max-attempts", func(x *diffSeq) []any {
		out := []any{x.claim(), x.finalize(1, effectspec.Unknown), x.claim(), 100, x.finalize(2, effectspec.Unknown)}
		// Refused until attempt 2's reservation + 2 leases, then allowed;
		// then 4 leases; max_attempts 4 ends it.
		out = append(out, x.claim(), 2*x.p.lease-101, x.claim(), 1, x.claim(), x.finalize(3, effectspec.Unknown),
			x.claim(), 4*x.p.lease, x.claim(), x.finalize(4, effectspec.Unknown), 100*x.p.lease, x.claim())
		return out
	}},
	{"settle-waits-for-earlier-attempt", func(x *diffSeq) []any {
		c2 := x.claim()
		return []any{x.claim(), x.p.lease + 1, c2, x.finalize(2, effectspec.Unknown), x.settle(2),
			x.p.timeout - x.p.lease, x.settle(2), x.p.lease, x.settle(2)}
	}},
	{"settle-waits-after-giveback", func(x *diffSeq) []any {
		c2 := x.claim()
		return []any{x.claim(), x.p.lease + 1, c2, x.giveback(c2, 2), x.settle(2), x.p.timeout, x.settle(2)}
	}},
	{"decide-on-final-record", func(x *diffSeq) []any {
		h := x.claim()
		h.claim.ApprovalRequired = true
		return []any{x.claim(), x.finalize(1, effectspec.Unknown), h, x.settle(1), x.decide(h.claim.NewTicket, true)}
	}},
}

// diffSeq builds the ops of a directed sequence: every op a new op id,
// the owner's incarnation.
type diffSeq struct {
	p   diffParams
	ops int
}

func (x *diffSeq) op() string {
	x.ops++
	return fmt.Sprintf("OP%06d", x.ops)
}

func (x *diffSeq) claim() diffOp {
	op := x.op()
	return diffOp{script: "claim", claim: lifecycle.ClaimRequest{ScopeVersion: 1, RequestHash: diffHashes[0], Binding: effectspec.BindingHeader,
		Fingerprint: diffFPs[0], Route: diffRoutes[0], KeySource: 's', Lease: x.p.lease, Retention: x.p.retention,
		UnknownRetention: x.p.uretention, Timeout: x.p.timeout, Window: x.p.window, Op: op, NewTicket: "apt_" + op,
		Incarnation: "INC00001", VendorKey: strings.Repeat("\x05", 16), MaxAttempts: x.p.maxAttempts}}
}

// claimCopy is c sent again: the same op id.
func (x *diffSeq) claimCopy(c diffOp) diffOp { return c }

func (x *diffSeq) reserve(token int64, never bool) diffOp {
	return diffOp{script: "reserve", res: lifecycle.ReserveRequest{Token: token, Op: x.op(), Lease: x.p.lease,
		UnknownRetention: x.p.uretention, Timeout: x.p.timeout, PrevNever: never, Incarnation: "INC00001", MaxAttempts: x.p.maxAttempts}}
}

func (x *diffSeq) finalize(token int64, st effectspec.Outcome) diffOp {
	ttl := x.p.retention
	if st == effectspec.Unknown {
		ttl = x.p.uretention
	}
	return diffOp{script: "finalize", fin: lifecycle.FinalizeRequest{Token: token, State: st, Op: x.op(), TTL: ttl,
		Incarnation: "INC00001"}}
}

func (x *diffSeq) giveback(c diffOp, token int64) diffOp {
	return diffOp{script: "giveback", gb: lifecycle.GiveBackRequest{Token: token, ClaimOp: c.claim.Op, Op: x.op(),
		UnknownRetention: x.p.uretention, Incarnation: "INC00001"}}
}

func (x *diffSeq) decide(ticket string, approve bool) diffOp {
	return diffOp{script: "decide", dec: lifecycle.DecideRequest{Ticket: ticket, Approve: approve, Op: x.op(),
		Retention: x.p.retention, ScopeVersion: 1}}
}

func (x *diffSeq) settle(attempts int64) diffOp {
	return diffOp{script: "settle", set: lifecycle.SettleRequest{Attempts: attempts, State: effectspec.DefinitelyRejected, Op: x.op(),
		Retention: x.p.retention, Who: "ops@x", Note: "checked", Margin: x.p.lease, ScopeVersion: 1}}
}

// runDirected runs every directed sequence; it returns the first
// disagreement.
func runDirected(ctx context.Context, b diffBackend, scripts diffScripts, real bool, seen map[string]int) error {
	for _, s := range diffDirected {
		p := diffParams{lease: 1000, timeout: 5000, window: 30_000, retention: 20_000, uretention: 60_000, maxAttempts: 4}
		if real {
			p.retention, p.uretention = 600_000, 1_800_000
		}
		if err := resetDiff(ctx, b); err != nil {
			return err
		}
		d := &diffRun{b: b, scripts: scripts, now: diffStart, seen: seen}
		b.setNow(d.now, 0)
		for _, st := range s.steps(&diffSeq{p: p}) {
			var err error
			switch v := st.(type) {
			case int64:
				err = d.advance(ctx, v)
			case int:
				err = d.advance(ctx, int64(v))
			case diffOp:
				err = d.apply(ctx, v)
			}
			if err != nil {
				return fmt.Errorf("directed %s: %w", s.name, err)
			}
		}
	}
	return nil
}

// genInner is the body's reply inside gen_wrap's {reply, generation}.
func genInner(msgs []rueidis.RedisMessage) ([]rueidis.RedisMessage, error) {
	if len(msgs) != 2 {
		return nil, fmt.Errorf("gen_wrap reply of %d elements", len(msgs))
	}
	return msgs[0].ToArray()
}
