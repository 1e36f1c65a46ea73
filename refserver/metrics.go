package main

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics live on their own registry, so that nothing registered globally
// by a library leaks into /metrics.
type metrics struct {
	reg            *prometheus.Registry
	claims         *prometheus.CounterVec // by claim result
	attempts       *prometheus.CounterVec // by phase
	attemptSeconds *prometheus.HistogramVec
	outcomes       *prometheus.CounterVec // by receipt outcome
	replays        prometheus.Counter
	refusals       *prometheus.CounterVec   // by wire reason
	storeErrors    *prometheus.CounterVec   // by store operation
	storeSeconds   *prometheus.HistogramVec // by store operation (timedStore)
	callSeconds    *prometheus.HistogramVec
	// claimRecoveries counts claims settled in the background by result
	// (retry.ClaimRecovery); claimRecovering is how many run now.
	claimRecoveries *prometheus.CounterVec
	claimRecovering prometheus.Gauge
	// settlements counts unknown calls settled by an operator, by outcome.
	settlements *prometheus.CounterVec
	// quotaRefusals counts calls refused quota_exceeded, by workspace
	// (store_full is in refusals only: it is no workspace's).
	quotaRefusals *prometheus.CounterVec
	// dataLost reports whether the store lost its data (1) or not (0), as
	// the function setDataLost gave says; 0 until one is given.
	dataLost atomic.Pointer[func() bool]
	// probes counts GET and DELETE requests on /mcp (an MCP client's probe
	// for a stream or a session), which are answered 405 but are not
	// refusals of a call.
	probes prometheus.Counter
	// frontLog rate-limits the log lines of front-door refusals.
	frontLog frontLog
}

// setDataLost makes obol_store_data_lost report lost(): 1 while the store's
// data is lost and not yet acknowledged.
func (m *metrics) setDataLost(lost func() bool) { m.dataLost.Store(&lost) }

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "obol_claims_total", Help: "Claims by result (claimed, replay, held, request_mismatch, ...).",
		}, []string{"result"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "obol_attempts_total", Help: "Outbound attempts by phase (before_send, post_send, responded).",
		}, []string{"phase"}),
		attemptSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "obol_attempt_duration_seconds", Help: "Duration of one outbound attempt.",
			Buckets: prometheus.DefBuckets,
		}, []string{"phase"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "obol_outcomes_total", Help: "Answered tool calls by outcome (accepted, definitely_rejected, unknown, held).",
		}, []string{"outcome"}),
		replays: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "obol_replays_total", Help: "Tool calls answered from a stored result.",
		}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "obol_refusals_total", Help: "Refused requests by wire reason.",
		}, []string{"reason"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "obol_store_errors_total", Help: "Store (Redis) errors by operation.",
		}, []string{"op"}),
		// A store call is one Redis round trip: tens of microseconds to a
		// few milliseconds, below DefBuckets' first bucket (5ms).
		storeSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "obol_store_duration_seconds", Help: "Duration of one store (Redis) call on a call's path, by operation.",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}, []string{"op"}),
		callSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "obol_call_duration_seconds", Help: "Duration of tools/call by outcome or refusal reason.",
			Buckets: prometheus.DefBuckets,
		}, []string{"result"}),
	}
	m.claimRecoveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "obol_claim_recoveries_total",
		Help: "Claims whose outcome was unknown to their caller, settled in the background, by result (started, given_back, settled, stale, dropped, abandoned).",
	}, []string{"result"})
	m.claimRecovering = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "obol_claim_recoveries_running", Help: "Claims being re-sent or given back in the background now.",
	})
	m.reg.MustRegister(m.claimRecoveries, m.claimRecovering)
	m.settlements = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "obol_settlements_total", Help: "Unknown calls settled by an operator, by outcome (accepted, definitely_rejected).",
	}, []string{"outcome"})
	m.quotaRefusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "obol_quota_refusals_total", Help: "Calls refused quota_exceeded, by workspace.",
	}, []string{"workspace"})
	m.probes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "obol_mcp_probes_total", Help: "GET and DELETE requests on /mcp (stream and session probes), answered 405; not refusals.",
	})
	lost := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "obol_store_data_lost", Help: "1 while the store has lost its data and no operator has acknowledged it, else 0.",
	}, func() float64 {
		if f := m.dataLost.Load(); f != nil && (*f)() {
			return 1
		}
		return 0
	})
	m.reg.MustRegister(m.settlements, m.quotaRefusals, m.probes, lost)
	m.reg.MustRegister(m.claims, m.attempts, m.attemptSeconds, m.outcomes, m.replays, m.refusals, m.storeErrors,
		m.storeSeconds, m.callSeconds, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
