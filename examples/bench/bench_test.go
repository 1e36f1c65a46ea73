package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// TestMain serves the bare or the limit server when the harness under test
// starts this binary in that role, as main does.
func TestMain(m *testing.M) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code, ok := serveRole(ctx)
	stop()
	if ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// needRedis skips when redis-server or redis-benchmark is missing, loudly,
// and fails instead when OBOL_REQUIRE_REDIS=1.
func needRedis(t *testing.T) {
	t.Helper()
	for _, bin := range []string{"redis-server", "redis-benchmark"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("OBOL_REQUIRE_REDIS") == "1" {
				t.Fatalf("%s not found and OBOL_REQUIRE_REDIS=1: %v", bin, err)
			}
			t.Skipf("SKIPPED: %s not found (%v); set OBOL_REQUIRE_REDIS=1 to make this a failure", bin, err)
		}
	}
}

var cellSep = regexp.MustCompile(`\s{2,}`)

// tableRows returns the cells of the table's rows in the harness's output.
func tableRows(t *testing.T, out string) [][]string {
	t.Helper()
	var rows [][]string
	inTable := false
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "#  measurement"):
			inTable = true
		case inTable && strings.TrimSpace(line) == "":
			inTable = false
		case inTable:
			cells := cellSep.Split(strings.TrimSpace(line), -1)
			if len(cells) != 7 {
				t.Fatalf("row %q has %d cells, want 7: %q", line, len(cells), cells)
			}
			rows = append(rows, cells)
		}
	}
	return rows
}

func TestQuickRunPrintsEveryRow(t *testing.T) {
	needRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	if code := run(ctx, []string{"-redis-server", "-quick", "-mem-records", "500"}, &out, &errb); code != 0 {
		t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	t.Logf("table:\n%s", out.String())

	rows := tableRows(t, out.String())
	count := map[string]int{}
	digit := regexp.MustCompile(`[0-9]`)
	for _, r := range rows {
		id, name, ours, ref, ratio, verdict := r[0], r[1], r[2], r[3], r[4], r[6]
		count[id]++
		if !digit.MatchString(ours) {
			t.Errorf("row %s %q: ours %q has no number", id, name, ours)
		}
		if verdict != pass && verdict != miss && verdict != info {
			t.Errorf("row %s %q: verdict %q", id, name, verdict)
		}
		if id == "5" {
			continue
		}
		if id == "7" && strings.Contains(name, "inside refserver") {
			continue // checkProxyRows
		}
		if id == "4" && strings.Contains(name, "inside refserver") {
			// The breakdown of row 4: refserver's own figures, no ratio.
			for _, part := range []string{"claim ", "vendor ", "finalize ", "handler "} {
				if !strings.Contains(ours, part) {
					t.Errorf("row 4 %q lacks %q: %q", name, part, ours)
				}
			}
			if strings.Contains(name, "1 client") && !strings.Contains(ref, "PING p50") {
				t.Errorf("row 4 %q: reference %q lacks the idle round trip", name, ref)
			}
			if verdict != info {
				t.Errorf("row 4 %q: verdict %q", name, verdict)
			}
			continue
		}
		if (id == "4" || id == "7") && strings.Contains(name, "CPU time per call") {
			// Process and Redis CPU of both sides, their ratio.
			for _, side := range []string{ours, ref} {
				if !strings.Contains(side, "process ") || !strings.Contains(side, ", Redis ") {
					t.Errorf("row %s %q: %q lacks the process or Redis CPU", id, name, side)
				}
			}
		}
		if !digit.MatchString(ref) {
			t.Errorf("row %s %q: reference %q has no number", id, name, ref)
		}
		if v, err := strconv.ParseFloat(strings.TrimSuffix(ratio, "x"), 64); err != nil || v <= 0 {
			t.Errorf("row %s %q: ratio %q is not a positive number", id, name, ratio)
		}
	}
	// 1 and 2: concurrency 1, 50, 200; 3: 1 KiB and 64 KiB; 4: 1 and 32
	// clients, each against the limit and the bare server, with the CPU
	// per call and the breakdown; 5: three kinds (no body, 1 KiB, 64 KiB), each MEMORY USAGE,
	// used_memory with the projection, and the script time per operation;
	// 6: the Redis time of quotas; 7: 1 and 32 clients against the MCP
	// limit, each with the CPU per call and the breakdown.
	want := map[string]int{"1": 3, "2": 3, "3": 2, "4": 8, "5": 9, "6": 1, "7": 6}
	for id, n := range want {
		if count[id] != n {
			t.Errorf("table has %d rows numbered %s, want %d", count[id], id, n)
		}
	}
	for _, r := range rows {
		if r[0] == "1" && strings.Contains(r[1], "c=200") && r[5] != ">= 0.80" {
			t.Errorf("row 1 at c=200 has target %q", r[5])
		}
		if r[0] == "5" && strings.Contains(r[1], "no body: MEMORY USAGE") && r[5] != "<= 400 B" {
			t.Errorf("row 5 without a body has target %q", r[5])
		}
		for name, tgt := range map[string]string{"no body: used_memory": "-", "1 KiB body: used_memory": "<= 1,000 B",
			"64 KiB body: used_memory": "-", "1 client: refserver vs the limit": ">= 0.95", "32 clients: refserver vs the limit": ">= 0.95",
			"1 client: refserver vs same SDK": "-", "32 clients: refserver vs same SDK": "-",
			"upstream, 1 client: refserver in front": ">= 0.95", "upstream, 32 clients: refserver in front": ">= 0.95"} {
			if strings.Contains(r[1], name) && r[5] != tgt {
				t.Errorf("row %s %q has target %q, want %q", r[0], r[1], r[5], tgt)
			}
		}
		if r[0] == "5" && strings.Contains(r[1], "script time") && !regexp.MustCompile(`^[0-9.]+[µm]?s / [0-9.]+[µm]?s$`).MatchString(r[2]) {
			t.Errorf("row 5 %q: %q is not two durations", r[1], r[2])
		}
	}
	if !regexp.MustCompile(`\d+ of 12 targets met`).MatchString(out.String()) {
		t.Errorf("no summary line with 12 targets in:\n%s", out.String())
	}
	var proxy [][]string
	for _, r := range rows {
		if r[0] == "7" {
			proxy = append(proxy, r)
		}
	}
	checkProxyRows(t, proxy)
}

// checkProxyRows checks row 7 (refserver in front of an MCP upstream
// against the MCP limit server): per count of clients a line of rates, one
// of CPU per call and refserver's breakdown. It is a part of the every-row
// run rather than a run of its own, which would cost CI a second harness.
func checkProxyRows(t *testing.T, rows [][]string) {
	t.Helper()
	if len(rows) != 6 {
		t.Fatalf("%d rows numbered 7, want 6", len(rows))
	}
	rate := regexp.MustCompile(`^[0-9,]+/s p50 \S+ p99 \S+ \(rate [0-9,]+/s-[0-9,]+/s\)$`)
	for i, clients := range []string{"1 client", "32 clients"} {
		r, cpu, in := rows[3*i], rows[3*i+1], rows[3*i+2]
		if r[0] != "7" || !strings.Contains(r[1], "MCP upstream, "+clients+": refserver in front of it vs the limit") {
			t.Errorf("row %q", r[:2])
		}
		for _, side := range r[2:4] {
			if !rate.MatchString(side) {
				t.Errorf("row %q: %q is not a rate with p50, p99 and spread", r[1], side)
			}
		}
		if v, err := strconv.ParseFloat(r[4], 64); err != nil || v <= 0 {
			t.Errorf("row %q: ratio %q is not a positive number", r[1], r[4])
		}
		if r[5] != ">= 0.95" || (r[6] != pass && r[6] != miss) {
			t.Errorf("row %q: target %q, result %q", r[1], r[5], r[6])
		}
		if cpu[0] != "7" || !strings.Contains(cpu[1], clients+": CPU time per call") || cpu[6] != info {
			t.Errorf("row %q", cpu)
		}
		for _, side := range cpu[2:4] {
			if !strings.Contains(side, "process ") || !strings.Contains(side, ", Redis ") {
				t.Errorf("row %q: %q lacks the process or Redis CPU", cpu[1], side)
			}
		}
		if in[0] != "7" || !strings.Contains(in[1], clients+", inside refserver") || in[6] != info {
			t.Errorf("row %q", in)
		}
		for _, part := range []string{"claim ", "vendor ", "finalize ", "handler "} {
			if !strings.Contains(in[2], part) {
				t.Errorf("row %q lacks %q: %q", in[1], part, in[2])
			}
		}
	}
}

func TestHandClaimKeepsTheStateTable(t *testing.T) {
	needRedis(t)
	ctx := context.Background()
	rs, err := startRedis(ctx, "redis-server")
	if err != nil {
		t.Fatal(err)
	}
	defer rs.stop()
	h := newHandClaim(rs.addr, 0, 4)
	defer h.close()
	w, err := newWorkload()
	if err != nil {
		t.Fatal(err)
	}
	key := w.keyBase + w.keyer().next().String()
	step := func(a claimArgs, want string) {
		t.Helper()
		got, err := h.claim(ctx, key, a)
		if err != nil || got != want {
			t.Fatalf("claim = %q, %v; want %q", got, err, want)
		}
	}
	step(w.args, "claimed")
	step(w.args, "in_progress")
	other := w.args
	other.rh = strings.Repeat("0", 32)
	step(other, "request_mismatch")
	other = w.args
	other.fp = strings.Repeat("0", 32)
	step(other, "destination_conflict")
	// An expired lease is reclaimed with the next attempt for a vendor
	// binding, as the script does.
	if err := h.rdb.HSet(ctx, key, "l", "1").Err(); err != nil {
		t.Fatal(err)
	}
	step(w.args, "claimed")
	if n, _ := h.rdb.HGet(ctx, key, "n").Result(); n != "2" {
		t.Fatalf("attempt count after the reclaim = %q, want 2", n)
	}
	if err := h.rdb.HSet(ctx, key, "s", "a").Err(); err != nil {
		t.Fatal(err)
	}
	step(w.args, "replay")
	// The record has the fields the script writes, and its retention.
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{rs.addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ttl, err := client.Do(ctx, client.B().Pttl().Key(key).Build()).AsInt64()
	if err != nil || ttl < (23*time.Hour).Milliseconds() {
		t.Fatalf("PTTL = %d, %v; want about 24h", ttl, err)
	}
}

func TestParseBenchCSV(t *testing.T) {
	good := "\"test\",\"rps\",\"avg_latency_ms\"\n\"EVALSHA abc 1 k\",\"92986.05\",\"0.5\"\n"
	if r, err := parseBenchCSV([]byte(good)); err != nil || r != 92986.05 {
		t.Errorf("good output: %v, %v", r, err)
	}
	for name, bad := range map[string]string{
		"server error": "Error from server: NOSCRIPT No matching script. Please use EVAL.\n\"test\",\"rps\"\n",
		"no row":       "\"test\",\"rps\"\n",
		"not csv":      "\"test",
		"zero rps":     "\"test\",\"rps\"\n\"x\",\"0\"\n",
		"other header": "\"name\",\"qps\"\n\"x\",\"1\"\n",
	} {
		if r, err := parseBenchCSV([]byte(bad)); err == nil {
			t.Errorf("%s: rate %v, want an error", name, r)
		}
	}
}

func TestFlags(t *testing.T) {
	for _, args := range [][]string{
		{},                                     // no Redis
		{"-redis-server", "-redis", "h:1"},     // both
		{"-redis-server", "-concurrency", "0"}, // out of range
		{"-redis-server", "-concurrency", "1,x"},
		{"-redis-server", "-rows", "8"},
		{"-redis-server", "-mcp-clients", "0"},
		{"-redis-server", "-duration", "1ms"},
		{"-redis-server", "-rounds", "0"},
		{"-redis", "localhost"}, // no port
		{"-redis-server", "extra"},
	} {
		var errb bytes.Buffer
		if code := run(context.Background(), args, &bytes.Buffer{}, &errb); code != 2 || errb.Len() == 0 {
			t.Errorf("%q: exit %d, stderr %q; want 2 and a message", args, code, errb.String())
		}
	}
	o, err := parseFlags([]string{"-redis-server", "-quick"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if o.duration != 300*time.Millisecond || o.rounds != 1 || len(o.concurrency) != 3 || !o.rows[5] || !o.rows[7] {
		t.Errorf("-quick: %+v", o)
	}
	o, err = parseFlags([]string{"-redis-server", "-quick", "-duration", "2s"}, &bytes.Buffer{})
	if err != nil || o.duration != 2*time.Second {
		t.Errorf("-quick -duration 2s: %v, %v", o.duration, err)
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	if got := group(1234567); got != "1,234,567" {
		t.Errorf("group = %q", got)
	}
}
