package lincheck

import (
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
)

// sealTimeout bounds the check of the partitions one seal removes.
const sealTimeout = time.Minute

// partition is the recorded history of one key.
type partition struct {
	ref     keyRef
	ops     []porcupine.Operation
	pending map[int]pendingOp // ops begun and not yet recorded, by ticket
	retired time.Time         // when its slot moved on; zero while in use
}

// pendingOp is an op that has been called and has not returned.
type pendingOp struct {
	client int
	in     Input
}

// history is what a lane recorded. A long run would hold every operation
// in memory; instead, a key whose slot moved on and that nobody touched
// for a while is sealed: checked once, its verdict kept, its operations
// dropped. An op on a sealed key is not run (its client acts as a gateway
// that died).
type history struct {
	parts  map[string]*partition // unsealed, by key name
	order  []string              // unsealed keys in order of first use
	sealed map[string]bool
	ops    int
	amb    int
	stats  map[string]int
	done   Result // verdicts of the sealed keys
	ticket int    // numbers pending ops
}

// quiet is how long a retired key must go untouched before it is sealed:
// longer than any plan a worker still holds on it runs.
func (l *Lane) quiet() time.Duration { return 4*l.cfg.Lease + 2*l.cfg.OpTimeout }

// begin registers an op of client on k that is about to be called (its
// Call set), and returns its ticket for record; false if k is sealed.
func (l *Lane) begin(client int, k keyRef, in Input) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sealed[k.name] {
		return 0, false
	}
	p := l.parts[k.name]
	if p == nil {
		p = &partition{ref: k, pending: map[int]pendingOp{}}
		l.parts[k.name] = p
		l.order = append(l.order, k.name)
	}
	l.ticket++
	p.pending[l.ticket] = pendingOp{client, in}
	return l.ticket, true
}

// record appends a begun operation to its key's history.
func (l *Lane) record(ticket int, k keyRef, out Output) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.parts[k.name]
	op := p.pending[ticket]
	delete(p.pending, ticket)
	p.ops = append(p.ops, porcupine.Operation{ClientId: op.client, Input: op.in, Call: op.in.Call, Output: out, Return: out.Return})
	l.ops++
	if out.Status == statusAmbiguous {
		l.amb++
	}
	tag := op.in.Kind.String() + ":" + string(out.Status)
	if out.Applied {
		tag += "+applied"
	}
	l.stats[tag]++
}

// snapshot copies p's history for a check; an op still running counts as
// ambiguous, since its effect may already show in others.
func (p *partition) snapshot() *partition {
	ops := slices.Clone(p.ops)
	for _, op := range p.pending {
		out := Output{Status: statusAmbiguous, Err: "still running", Return: never}
		ops = append(ops, porcupine.Operation{ClientId: op.client, Input: op.in, Call: op.in.Call, Output: out, Return: never})
	}
	return &partition{ref: p.ref, ops: ops}
}

// retireKey notes that a key's slot moved on to a fresh key.
func (l *Lane) retireKey(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p := l.parts[name]; p != nil && p.retired.IsZero() {
		p.retired = time.Now()
	}
}

// seal checks and drops the keys retired before cutoff with no op in
// flight.
func (l *Lane) seal(cutoff time.Time, timeout time.Duration) {
	l.sealMu.Lock()
	defer l.sealMu.Unlock()
	l.mu.Lock()
	var parts []*partition
	keep := l.order[:0]
	for _, name := range l.order {
		p := l.parts[name]
		if p.retired.IsZero() || p.retired.After(cutoff) || len(p.pending) > 0 {
			keep = append(keep, name)
			continue
		}
		parts = append(parts, p)
		l.sealed[name] = true
		delete(l.parts, name)
	}
	l.order = keep
	l.mu.Unlock()
	if len(parts) == 0 {
		return
	}
	res := checkParts(l.model, parts, timeout)
	l.mu.Lock()
	l.done = merge(l.done, res)
	l.mu.Unlock()
}

// merge adds the verdicts of b to a; the report stays a's if it has one.
func merge(a, b Result) Result {
	a.Keys += b.Keys
	a.Violations += b.Violations
	a.Undecided += b.Undecided
	if a.Report == "" {
		a.Report = b.Report
	}
	return a
}
