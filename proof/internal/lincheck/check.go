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
// if it is zero or negative). It may be called while Run runs; it checks
// the operations recorded so far.
func (l *Lane) Check(timeout time.Duration) Result {
	l.mu.Lock()
	ops := slices.Clone(l.ops)
	order := slices.Clone(l.order)
	keys := make(map[string]keyRef, len(l.keys))
	for k, v := range l.keys {
		keys[k] = v
	}
	res := Result{Ops: len(ops), Keys: len(order), Ambiguous: l.amb}
	l.mu.Unlock()
	return checkHistory(l.model, ops, order, keys, timeout, res)
}

func checkHistory(m model, ops []porcupine.Operation, order []string, keys map[string]keyRef, timeout time.Duration, res Result) Result {
	parts := map[string][]porcupine.Operation{}
	for _, op := range ops {
		k := op.Input.(Input).Key
		parts[k] = append(parts[k], op)
	}
	pm := m.porcupine()
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	verdicts := make([]porcupine.CheckResult, len(order))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, name := range order {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if deadline.IsZero() {
				verdicts[i] = porcupine.CheckOperationsTimeout(pm, parts[name], 0)
				return
			}
			left := time.Until(deadline)
			if left <= 0 {
				verdicts[i] = porcupine.Unknown
				return
			}
			verdicts[i] = porcupine.CheckOperationsTimeout(pm, parts[name], left)
		})
	}
	wg.Wait()
	for i, v := range verdicts {
		switch v {
		case porcupine.Illegal:
			if res.Violations == 0 {
				res.Report = report(pm, order[i], keys[order[i]], parts[order[i]])
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
func report(pm porcupine.Model, name string, k keyRef, ops []porcupine.Operation) string {
	ops = slices.Clone(ops)
	slices.SortStableFunc(ops, func(a, b porcupine.Operation) int {
		if a.Call != b.Call {
			return cmp.Compare(a.Call, b.Call)
		}
		return cmp.Compare(a.Return, b.Return)
	})
	placed := longestPrefix(pm, ops)
	var b strings.Builder
	binding := "header"
	if k.unsupported {
		binding = "unsupported"
	}
	fmt.Fprintf(&b, "key %s (%s, binding %s): %d operations are not linearizable", name, k.key, binding, len(ops))
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
