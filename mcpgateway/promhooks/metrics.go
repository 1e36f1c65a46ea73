package promhooks

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/mcpgateway"
	"github.com/obol-gateway/obol/retry"
)

// Metrics are a gateway's Prometheus metrics. They live on their own
// registry, so that nothing registered globally by a library leaks into
// [Metrics.Handler].
type Metrics struct {
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
	// quotaRefusals counts calls refused for a workspace's quota, by
	// workspace.
	quotaRefusals *prometheus.CounterVec
	// dataLost is what obol_store_data_lost reports (SetDataLost).
	dataLost atomic.Pointer[func() bool]
	// probes counts GET and DELETE requests on /mcp (an MCP client's probe
	// for a stream or a session), which are answered 405 but are not
	// refusals of a call.
	probes prometheus.Counter
}

// New returns the metrics on a new registry, with the Go and process
// collectors.
func New() *Metrics {
	m := &Metrics{
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

// Handler serves the metrics in the Prometheus text format (GET /metrics).
func (m *Metrics) Handler() http.Handler { return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}) }

// Instrument counts what gc's gateway and orchestrator report: it chains
// onto the hooks already set (they still run, after the count) and times
// every store call of gc.Orchestrator on a call's path. Call it once, before
// [mcpgateway.New].
func (m *Metrics) Instrument(gc *mcpgateway.Config) {
	gc.OnRefusal = chain(gc.OnRefusal, m.Refusal)
	gc.OnStoreError = chain(gc.OnStoreError, m.StoreError)
	gc.OnProbe = chain(gc.OnProbe, func(string) { m.probes.Inc() })
	onQuota := gc.OnQuotaError
	gc.OnQuotaError = func(op string, err error) {
		m.StoreError("quota_" + op)
		if onQuota != nil {
			onQuota(op, err)
		}
	}
	prev := gc.OnCall
	gc.OnCall = func(ctx context.Context, c mcpgateway.CallStart) (context.Context, func(mcpgateway.CallEnd)) {
		var end func(mcpgateway.CallEnd)
		if prev != nil {
			ctx, end = prev(ctx, c)
		}
		return ctx, func(e mcpgateway.CallEnd) {
			m.callEnd(e)
			if end != nil {
				end(e)
			}
		}
	}
	if o := gc.Orchestrator; o != nil {
		m.orchestrator(o)
	}
}

func (m *Metrics) orchestrator(o *retry.Orchestrator) {
	if o.Store != nil {
		o.Store = newTimedStore(o.Store, m.storeSeconds)
	}
	onClaim := o.OnClaim
	o.OnClaim = func(c *retry.Call, st idempotency.Status) {
		m.claims.WithLabelValues(string(st)).Inc()
		if onClaim != nil {
			onClaim(c, st)
		}
	}
	onAttempt := o.OnAttempt
	o.OnAttempt = func(c *retry.Call, n int, res retry.Result, d time.Duration) {
		m.attempts.WithLabelValues(string(res.Phase)).Inc()
		m.attemptSeconds.WithLabelValues(string(res.Phase)).Observe(d.Seconds())
		if onAttempt != nil {
			onAttempt(c, n, res, d)
		}
	}
	onStoreError := o.OnStoreError
	o.OnStoreError = func(c *retry.Call, op string, err error) {
		m.StoreError(op)
		if onStoreError != nil {
			onStoreError(c, op, err)
		}
	}
	onRecovery := o.OnClaimRecovery
	o.OnClaimRecovery = func(c *retry.Call, ev retry.ClaimRecovery) {
		m.claimRecoveries.WithLabelValues(string(ev)).Inc()
		switch ev {
		case retry.RecoveryStarted:
			m.claimRecovering.Inc()
		case retry.RecoveryDropped:
		default:
			m.claimRecovering.Dec()
		}
		if onRecovery != nil {
			onRecovery(c, ev)
		}
	}
}

func (m *Metrics) callEnd(e mcpgateway.CallEnd) {
	label := e.Refusal
	if e.Refusal == "quota_exceeded" {
		m.quotaRefusals.WithLabelValues(e.Workspace).Inc()
	}
	if e.Receipt != nil {
		label = string(e.Receipt.Outcome)
		m.outcomes.WithLabelValues(label).Inc()
		if e.Receipt.Replayed {
			m.replays.Inc()
		}
	}
	m.callSeconds.WithLabelValues(label).Observe(e.Elapsed.Seconds())
}

// Refusal counts a refused request by its wire reason (obol_refusals_total):
// the gateway's through Instrument, and an admin endpoint's.
func (m *Metrics) Refusal(reason string) { m.refusals.WithLabelValues(reason).Inc() }

// StoreError counts a store error by operation (obol_store_errors_total).
func (m *Metrics) StoreError(op string) { m.storeErrors.WithLabelValues(op).Inc() }

// Settlement counts an unknown call settled by an operator, by outcome
// (obol_settlements_total).
func (m *Metrics) Settlement(outcome string) { m.settlements.WithLabelValues(outcome).Inc() }

// SetDataLost makes obol_store_data_lost report lost(): 1 while the store's
// data is lost and not yet acknowledged; 0 until it is set.
func (m *Metrics) SetDataLost(lost func() bool) { m.dataLost.Store(&lost) }

func chain(prev func(string), count func(string)) func(string) {
	return func(s string) {
		count(s)
		if prev != nil {
			prev(s)
		}
	}
}
