package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestInsideMeans(t *testing.T) {
	page := `# HELP obol_store_duration_seconds x
# TYPE obol_store_duration_seconds histogram
obol_store_duration_seconds_bucket{op="claim",le="0.0001"} 1
obol_store_duration_seconds_sum{op="claim"} SUMC
obol_store_duration_seconds_count{op="claim"} CNTC
obol_store_duration_seconds_sum{op="finalize"} 0.004
obol_store_duration_seconds_count{op="finalize"} 20
obol_attempt_duration_seconds_sum{phase="responded"} 0.006
obol_attempt_duration_seconds_count{phase="responded"} 20
obol_call_duration_seconds_sum{result="accepted"} 0.01
obol_call_duration_seconds_count{result="accepted"} 20
go_gc_duration_seconds_sum 1.5
`
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(body))
	}))
	defer srv.Close()
	ctx := context.Background()
	body = strings.NewReplacer("SUMC", "0.001", "CNTC", "10").Replace(page)
	before, err := scrapeHistograms(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if got := before[`obol_store_duration_seconds{op="claim"}`]; got != [2]float64{0.001, 10} {
		t.Fatalf("claim series read as %v", got)
	}
	if got := before[`go_gc_duration_seconds`]; got != [2]float64{1.5, 0} {
		t.Fatalf("unlabelled series read as %v", got)
	}
	body = strings.NewReplacer("SUMC", "0.003", "CNTC", "20").Replace(page)
	after, err := scrapeHistograms(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	// Only claim moved: 2ms over 10 calls.
	if _, err := insideMeans(before, after); err == nil || !strings.Contains(err.Error(), "attempt_duration") {
		t.Fatalf("series that did not move: err %v", err)
	}
	after[`obol_store_duration_seconds{op="finalize"}`] = [2]float64{0.005, 30}
	after[`obol_attempt_duration_seconds{phase="responded"}`] = [2]float64{0.0075, 30}
	after[`obol_call_duration_seconds{result="accepted"}`] = [2]float64{0.02, 30}
	m, err := insideMeans(before, after)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Duration{"claim": 200 * time.Microsecond, "finalize": 100 * time.Microsecond,
		"vendor": 150 * time.Microsecond, "handler": time.Millisecond}
	for k, w := range want {
		if d := m[k] - w; d < -time.Nanosecond || d > time.Nanosecond {
			t.Errorf("%s: %v, want %v", k, m[k], w)
		}
	}
	body = "obol_store_duration_seconds_sum{op=\"claim\"} NaNx\n"
	if _, err := scrapeHistograms(ctx, srv.URL); err == nil {
		t.Error("a value that is not a number was read")
	}
}
