package promhooks

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// UnknownCounter counts a workspace's outstanding unknown calls
// ([*redisstore.Store] is one).
type UnknownCounter interface {
	CountUnknown(ctx context.Context, workspace string) (int, error)
}

// unknownEvery is how long a reading of obol_unknown_calls is reused: each
// reads every bucket of every workspace's unknown index (33 round trips per
// workspace), too much for every scrape.
const unknownEvery = 30 * time.Second

// unknownGauge is obol_unknown_calls{workspace}. A scrape shows the last
// reading and, when it is older than unknownEvery, starts the next one in
// the background (one at a time, bounded by unknownBound): a reading takes
// too many round trips to fit a scrape's timeout on a loaded store. A
// failed reading is logged and tried again after unknownEvery.
type unknownGauge struct {
	desc       *prometheus.Desc
	count      UnknownCounter
	workspaces []string
	log        *slog.Logger

	mu      sync.Mutex
	at      time.Time // of the last reading started
	reading bool
	counts  map[string]int
}

// unknownBound bounds one reading of obol_unknown_calls.
const unknownBound = 30 * time.Second

func (g *unknownGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *unknownGauge) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	if !g.reading && time.Since(g.at) >= unknownEvery {
		g.reading, g.at = true, time.Now()
		go g.read()
	}
	counts := g.counts
	g.mu.Unlock()
	for _, ws := range g.workspaces {
		if n, ok := counts[ws]; ok {
			ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, float64(n), ws)
		}
	}
}

func (g *unknownGauge) read() {
	ctx, cancel := context.WithTimeout(context.Background(), unknownBound)
	defer cancel()
	fresh := make(map[string]int, len(g.workspaces))
	var err error
	for _, ws := range g.workspaces {
		if fresh[ws], err = g.count.CountUnknown(ctx, ws); err != nil {
			break
		}
	}
	if err != nil {
		g.log.Warn("obol_unknown_calls not read", "error", err.Error())
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reading = false
	if err == nil {
		g.counts = fresh
	}
}

// WatchUnknown registers what an operator watches besides the call
// counters: obol_unknown_calls of each workspace, read from count (if not
// nil) in the background at most every 30s, and every workspace's
// obol_quota_refusals_total and both outcomes of obol_settlements_total at
// zero, so that a dashboard sees the series before the first event. A failed
// reading is logged to log. Call it once.
func (m *Metrics) WatchUnknown(workspaces []string, count UnknownCounter, log *slog.Logger) {
	for _, ws := range workspaces {
		m.quotaRefusals.WithLabelValues(ws)
	}
	m.settlements.WithLabelValues("accepted")
	m.settlements.WithLabelValues("definitely_rejected")
	if count == nil {
		return
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m.reg.MustRegister(&unknownGauge{
		desc: prometheus.NewDesc("obol_unknown_calls",
			"Calls whose outcome is unknown or whose attempt is in flight, by workspace (live entries of the unknown index; read in the background at most every 30s).",
			[]string{"workspace"}, nil),
		count: count, workspaces: slices.Clone(workspaces), log: log,
	})
}
