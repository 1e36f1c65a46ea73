package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// needRedis skips without redis-server, or fails when OBOL_REQUIRE_REDIS=1
// (CI) demands it.
func needRedis(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("OBOL_REQUIRE_REDIS") == "1" {
			t.Fatal("redis-server not found, and OBOL_REQUIRE_REDIS=1 requires it")
		}
		t.Skip("SKIPPING: the soak needs redis-server 7+ in PATH")
	}
}

// TestSoakCatchesBrokenStore runs a short soak against gateways whose store
// forgets records made by another process: the soak must fail with exit
// status 1, name the seed, and print the history of an offending key with
// the effects the vendor performed twice.
func TestSoakCatchesBrokenStore(t *testing.T) {
	t.Parallel()
	needRedis(t)
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"-duration", "20s", "-seed", "42", "-topology", "single",
		"-gateways", "3", "-clients", "8", "-broken", "forget-records"}, &out, &errOut)
	text := out.String()
	if code != 1 {
		t.Fatalf("exit status %d, want 1 (a violation); stderr:\n%s\nstdout (tail):\n%s", code, errOut.String(), tail(text, 40))
	}
	for _, want := range []string{"FAIL: ", "seed 42", "---- history of key idt_", "effect performed", "call via gateway"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q; tail:\n%s", want, tail(text, 40))
		}
	}
	if !regexp.MustCompile(`(?m)^  duplicates\s+[1-9]`).MatchString(text) {
		t.Errorf("the table shows no duplicate; tail:\n%s", tail(text, 40))
	}
}

// TestSoakCatchesStoreBlindToLoss runs a short soak, on the single Redis
// and on the Cluster, against gateways whose store does not watch for
// lost data: the restored snapshot (or the emptied keyspace) must show as
// a key dispatched a second time before any acknowledgement, exit status
// 1, with the loss in the offending key's history.
func TestSoakCatchesStoreBlindToLoss(t *testing.T) {
	t.Parallel()
	needRedis(t)
	for _, topo := range []string{"single", "cluster"} {
		t.Run(topo, func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			code := run(context.Background(), []string{"-duration", "12s", "-seed", "7", "-topology", topo,
				"-gateways", "3", "-clients", "8", "-broken", "blind-to-loss"}, &out, &errOut)
			text := out.String()
			if code != 1 {
				t.Fatalf("exit status %d, want 1 (a violation); stderr:\n%s\nstdout (tail):\n%s", code, errOut.String(), tail(text, 40))
			}
			if !regexp.MustCompile(`(?m)^  duplicates\s+[1-9]`).MatchString(text) {
				t.Errorf("the table shows no duplicate; tail:\n%s", tail(text, 40))
			}
			if !regexp.MustCompile(`FAULT store_(restored_from_snapshot|emptied)`).MatchString(text) {
				t.Errorf("no offending key's history shows the store loss; tail:\n%s", tail(text, 40))
			}
		})
	}
}

// TestSoakRejectsBadFlags: a bad flag is exit status 2, before anything
// starts.
func TestSoakRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-topology", "ring"},
		{"-gateways", "0"},
		{"-duration", "-1s"},
		{"-no-such-flag"},
	} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, &out, &errOut); code != 2 || errOut.Len() == 0 {
			t.Errorf("run(%q) = %d, stderr %q; want 2 and a message", args, code, errOut.String())
		}
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestAwaitPrintsEveryGoroutine: a wait past its bound prints the stack of
// every goroutine, the one that never finishes included, counts a harness
// error and fails; a wait whose goroutines finish prints nothing.
func TestAwaitPrintsEveryGoroutine(t *testing.T) {
	var out bytes.Buffer
	w := &world{topology: "single", out: &logger{w: &out, start: time.Now()}, c: newCounts()}
	finished := make(chan struct{})
	close(finished)
	if err := w.await(finished, time.Hour, "calls in flight"); err != nil || out.Len() != 0 {
		t.Fatalf("a finished wait: %v, printed %q", err, out.String())
	}

	never := make(chan struct{})
	defer close(never)
	started := make(chan struct{})
	go stuckCallForTest(started, never)
	<-started
	err := w.await(never, time.Millisecond, "calls in flight")
	if err == nil || !strings.Contains(err.Error(), "calls in flight") {
		t.Fatalf("err %v, want one naming what it waited for", err)
	}
	text := out.String()
	for _, want := range []string{"phase single: still waiting for calls in flight after 1ms; every goroutine:", "goroutine ", "stuckCallForTest"} {
		if !strings.Contains(text, want) {
			t.Errorf("the dump lacks %q:\n%s", want, tail(text, 40))
		}
	}
	if n := w.c.faults["harness_error"]; n != 1 {
		t.Errorf("%d harness errors counted, want 1", n)
	}
}

// stuckCallForTest is a goroutine that waits for what never comes.
func stuckCallForTest(started chan<- struct{}, never <-chan struct{}) {
	close(started)
	<-never
}

// TestWatchPrintsEveryGoroutineOnce: work that outlasts its bound gets
// every goroutine's stack printed once, a harness error, and stop reports
// it; work that ends in time gets nothing.
func TestWatchPrintsEveryGoroutineOnce(t *testing.T) {
	var out bytes.Buffer
	w := &world{topology: "cluster", out: &logger{w: &out, start: time.Now()}, c: newCounts()}
	if stop := w.watch(time.Hour, "the checks after the storm"); stop() || out.Len() != 0 {
		t.Fatalf("work done in time: stalled, or printed %q", out.String())
	}
	stop := w.watch(time.Nanosecond, "the checks after the storm")
	// The work outlasts its bound: it ends only once the dump is out.
	for !strings.Contains(w.out.snapshot(), "goroutine ") {
		runtime.Gosched()
	}
	if !stop() {
		t.Error("stop does not report the stall")
	}
	text := w.out.snapshot()
	w.mu.Lock()
	defer w.mu.Unlock()
	if !strings.Contains(text, "phase cluster: still waiting for the checks after the storm after 1ns; every goroutine:") ||
		strings.Count(text, "every goroutine:") != 1 {
		t.Errorf("want one dump under its title:\n%s", tail(text, 20))
	}
	if n := w.c.faults["harness_error"]; n != 1 {
		t.Errorf("%d harness errors counted, want 1", n)
	}
}

// snapshot is what a logger writing into a bytes.Buffer holds so far.
func (l *logger) snapshot() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.(*bytes.Buffer).String()
}

// TestHistoriesShowEveryKind: with more offending keys than it prints,
// the history print shows the first key of every violated invariant, one
// found late included, before the others as found.
func TestHistoriesShowEveryKind(t *testing.T) {
	w := &world{slots: map[string]*slot{}, obs: map[string]*observation{}, history: map[string][]event{}, c: newCounts(),
		out: &logger{w: io.Discard, start: time.Now()}}
	ten := tenant{id: "ws_a"}
	var ids []string
	for i := range 5 {
		s := w.slotFor(ten, toolInfo{name: "pay.charge"}, fmt.Sprintf("idt_%032x", i+1))
		ids = append(ids, s.id)
	}
	for _, id := range ids[:4] {
		w.violation("settled_not_replayed", id, "settled, then unknown")
	}
	w.violation("duplicates", ids[4], "effect performed twice")
	var out bytes.Buffer
	w.printHistories(&out, 3)
	text := out.String()
	for _, want := range []string{fmt.Sprintf("idt_%032x", 5), fmt.Sprintf("idt_%032x", 1), fmt.Sprintf("idt_%032x", 2),
		"(2 more offending keys not shown)"} {
		if !strings.Contains(text, want) {
			t.Errorf("the print lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, fmt.Sprintf("idt_%032x", 3)) || strings.Index(text, fmt.Sprintf("idt_%032x", 5)) > strings.Index(text, fmt.Sprintf("idt_%032x", 1)) {
		t.Errorf("the duplicate's key is not first, or a fourth key is shown:\n%s", text)
	}
}
