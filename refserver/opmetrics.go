package main

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency/redisstore"
)

// unknownCounter counts a workspace's outstanding unknown calls
// (*redisstore.Store.CountUnknown).
type unknownCounter interface {
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
	count      unknownCounter
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

// operatorMetrics registers what an operator watches besides the call
// counters: obol_unknown_calls (from the store's unknown index), and every
// workspace's obol_quota_refusals_total and both outcomes of
// obol_settlements_total at zero, so that a dashboard sees the series
// before the first event.
func (s *server) operatorMetrics() {
	for _, ws := range s.cfg.Workspaces {
		s.metrics.quotaRefusals.WithLabelValues(ws)
	}
	s.metrics.settlements.WithLabelValues("accepted")
	s.metrics.settlements.WithLabelValues("definitely_rejected")
	if c, ok := s.store.(unknownCounter); ok {
		s.metrics.reg.MustRegister(&unknownGauge{
			desc: prometheus.NewDesc("obol_unknown_calls",
				"Calls whose outcome is unknown or whose attempt is in flight, by workspace (live entries of the unknown index; read in the background at most every 30s).",
				[]string{"workspace"}, nil),
			count: c, workspaces: s.cfg.Workspaces, log: s.log,
		})
	}
}

// logStore writes the startup line that names the store: its addresses
// (never a password), Redis version, topology, prefix, the environment and
// the number of tools.
func logStore(ctx context.Context, log *slog.Logger, st *redisstore.Store, embedded bool, env effectspec.Environment, tools int) {
	d, err := st.Describe(ctx)
	addr := strings.Join(d.Addrs, ",")
	if embedded {
		addr = "embedded (" + addr + ")"
	}
	attrs := []any{"address", addr, "redis_version", d.Version, "topology", d.Topology, "prefix", d.Prefix,
		"environment", string(env), "tools", tools}
	if err != nil {
		attrs = append(attrs, "error", "version and topology not read")
	}
	log.Info("store", attrs...)
}

// frontLogEvery bounds the log lines of front-door refusals: one line per
// reason per interval, with the count of the ones it stands for.
const frontLogEvery = 10 * time.Second

// frontLog rate-limits the log lines of front-door refusals.
type frontLog struct {
	mu     sync.Mutex
	last   map[string]time.Time
	missed map[string]int
}

// logFrontRefusal logs a refusal of the front door (a request refused
// before it reached a tool: unauthorized, malformed_key, ...), at most one
// line per reason every frontLogEvery. The line holds the reason and the
// status, never the request's values.
func (s *server) logFrontRefusal(r refusal) {
	l := &s.metrics.frontLog
	l.mu.Lock()
	if l.last == nil {
		l.last, l.missed = map[string]time.Time{}, map[string]int{}
	}
	if time.Since(l.last[r.reason]) < frontLogEvery {
		l.missed[r.reason]++
		l.mu.Unlock()
		return
	}
	n := l.missed[r.reason]
	l.last[r.reason], l.missed[r.reason] = time.Now(), 0
	l.mu.Unlock()
	s.log.Info("request refused at the front door", "reason", r.reason, "status", r.status, "unlogged_since_last", n)
}
