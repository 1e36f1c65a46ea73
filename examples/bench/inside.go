package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Row 4's breakdown: where refserver's time per call goes, read from its
// own /metrics (sums and counts of histograms), and what one Redis round
// trip costs on this machine when the caller was idle before it, as every
// round trip of a call at one client is.

// insideSeries are the histograms of refserver read for the breakdown.
var insideSeries = []struct{ label, series string }{
	{"claim", `obol_store_duration_seconds{op="claim"}`},
	{"vendor", `obol_attempt_duration_seconds{phase="responded"}`},
	{"finalize", `obol_store_duration_seconds{op="finalize"}`},
	{"handler", `obol_call_duration_seconds{result="accepted"}`},
}

// histTotals is the sum (seconds) and count of each histogram series.
type histTotals map[string][2]float64

// scrapeHistograms reads the _sum and _count of every histogram series of
// a Prometheus text page.
func scrapeHistograms(ctx context.Context, base string) (histTotals, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	h := histTotals{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		metric, labels, _ := strings.Cut(name, "{")
		if labels != "" {
			labels = "{" + labels
		}
		i := 0
		base, found := strings.CutSuffix(metric, "_sum")
		if !found {
			if base, found = strings.CutSuffix(metric, "_count"); !found {
				continue
			}
			i = 1
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return nil, fmt.Errorf("/metrics: %s: %w", name, err)
		}
		t := h[base+labels]
		t[i] = v
		h[base+labels] = t
	}
	return h, sc.Err()
}

// insideMeans is the mean duration of each insideSeries between two
// scrapes; missing series make an error, as refserver must report them.
func insideMeans(before, after histTotals) (map[string]time.Duration, error) {
	m := map[string]time.Duration{}
	for _, s := range insideSeries {
		a, b := after[s.series], before[s.series]
		n := a[1] - b[1]
		if n <= 0 {
			return nil, fmt.Errorf("refserver's /metrics has no new %s", s.series)
		}
		m[s.label] = time.Duration((a[0] - b[0]) / n * float64(time.Second))
	}
	return m, nil
}

// idleRoundTrip is the median time of a Redis PING sent after the caller
// slept for gap, and back to back (gap 0).
func idleRoundTrip(ctx context.Context, e *env, gap time.Duration, n int) (time.Duration, error) {
	ds := make([]time.Duration, 0, n)
	for range n {
		if gap > 0 {
			time.Sleep(gap)
		}
		t0 := time.Now()
		if err := e.client.Do(ctx, e.client.B().Ping().Build()).Error(); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(t0))
	}
	slices.Sort(ds)
	return ds[len(ds)/2], nil
}
