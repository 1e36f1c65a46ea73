package lincheck

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Result of a Check.
type Result struct {
	Ops, Keys, Ambiguous int
	Violations           int    // keys whose history is not linearizable
	Undecided            int    // keys porcupine could not decide within the timeout
	Report               string // for the first violating key: its key and its full history, one op per line
}

// Check runs porcupine over the recorded history, partitioned by key: each
// key is checked on its own, a few at a time, all within timeout (no limit
// if it is zero or negative). Keys sealed during Run were checked then; their
// verdicts are included. It may be called while Run runs; it checks the
// operations recorded so far, those still running as ambiguous.
func (l *Lane) Check(timeout time.Duration) Result {
	l.sealMu.Lock()
	defer l.sealMu.Unlock()
	l.mu.Lock()
	parts := make([]*partition, 0, len(l.order))
	for _, name := range l.order {
		parts = append(parts, l.parts[name].snapshot())
	}
	done, ops, amb := l.done, l.ops, l.amb
	l.mu.Unlock()
	res := merge(done, checkParts(l.model, parts, timeout))
	res.Ops, res.Ambiguous = ops, amb
	return res
}

// checkParts checks each partition on its own and reports the first
// violating one in the order given.
func checkParts(m model, parts []*partition, timeout time.Duration) Result {
	pm := m.porcupine()
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	verdicts := make([]porcupine.CheckResult, len(parts))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if deadline.IsZero() {
				verdicts[i] = porcupine.CheckOperationsTimeout(pm, p.ops, 0)
				return
			}
			left := time.Until(deadline)
			if left <= 0 {
				verdicts[i] = porcupine.Unknown
				return
			}
			verdicts[i] = porcupine.CheckOperationsTimeout(pm, p.ops, left)
		})
	}
	wg.Wait()
	res := Result{Keys: len(parts)}
	for i, v := range verdicts {
		switch v {
		case porcupine.Illegal:
			if res.Violations == 0 {
				res.Report = report(pm, parts[i].ref, parts[i].ops)
			}
			res.Violations++
		case porcupine.Unknown:
			res.Undecided++
		}
	}
	return res
}

// report renders a key's history in order of call, and marks the ops that
// no linearization of a longest legal prefix could place.
func report(pm porcupine.Model, k keyRef, ops []porcupine.Operation) string {
	ops = slices.Clone(ops)
	slices.SortStableFunc(ops, func(a, b porcupine.Operation) int {
		if a.Call != b.Call {
			return cmp.Compare(a.Call, b.Call)
		}
		return cmp.Compare(a.Return, b.Return)
	})
	placed := longestPrefix(pm, ops)
	var b strings.Builder
	binding := cmp.Or(string(k.binding), "header")
	if k.unsupported {
		binding = "unsupported"
	}
	fmt.Fprintf(&b, "key %s (%s, binding %s): %d operations are not linearizable", k.name, k.key, binding, len(ops))
	if placed != nil {
		fmt.Fprintf(&b, "; the longest legal linearization places %d of them (+: placed, -: not)", len(placed))
	}
	b.WriteByte('\n')
	for i, op := range ops {
		mark := " "
		if placed != nil {
			mark = "-"
			if placed[i] {
				mark = "+"
			}
		}
		ret := "never"
		if op.Return != never {
			ret = clock(op.Return)
		}
		fmt.Fprintf(&b, "%s %4d c%-2d [%s, %s] %s\n", mark, i, op.ClientId, clock(op.Call), ret,
			describe(op.Input.(Input), op.Output.(Output)))
	}
	return b.String()
}

// longestPrefix returns, by index into ops, the ops of the longest partial
// linearization porcupine found, or nil if it found none in a few seconds.
func longestPrefix(pm porcupine.Model, ops []porcupine.Operation) map[int]bool {
	res, info := porcupine.CheckOperationsVerbose(pm, ops, 5*time.Second)
	if res != porcupine.Illegal {
		return nil
	}
	var best []int
	for _, part := range info.PartialLinearizations() {
		for _, lin := range part {
			if len(lin) > len(best) {
				best = lin
			}
		}
	}
	placed := map[int]bool{}
	for _, id := range best {
		placed[id] = true
	}
	return placed
}
