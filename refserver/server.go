package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/rueidis"
	"go.opentelemetry.io/otel/trace"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/mcpgateway"
	"github.com/obol-gateway/obol/receipt"
	"github.com/obol-gateway/obol/retry"
)

// maxAdminBytes bounds a /v1 request body.
const maxAdminBytes = 64 << 10

// storeReadTimeout bounds every read-only store call (redisstore
// Options.ReadTimeout): the client re-sends a read-only command after network
// errors and LOADING replies until its context ends, and a request's context
// may outlive its client, so reads must fail closed in time. It bounds every
// store call of an admin request too (server.bounded), and how long a
// tools/call waits for its claim before store_unavailable
// (retry.Orchestrator.ClaimWait): one figure for every answer a stalled
// Redis delays.
const storeReadTimeout = 2 * time.Second

// server is the reference gateway: the MCP endpoint (an mcpgateway.Gateway),
// the approval, capability and receipt endpoints, health and metrics.
type server struct {
	cfg     *config
	store   idempotency.Store
	orch    *retry.Orchestrator
	gw      *mcpgateway.Gateway
	log     *slog.Logger
	metrics *metrics
	// redact scrubs every configured secret and key (connection and
	// broker secrets, API keys, approver keys) from log lines, refusal
	// messages and settlement notes.
	redact receipt.Redactor
	tracer trace.Tracer // nil: no tracing (tracing.go)

	pinned pinStore // where pins are shared; nil keeps them in this process

	// storeTimeout bounds the store calls of every admin request (see
	// bounded); the store's own ReadTimeout bounds reads everywhere.
	storeTimeout time.Duration

	// health proves a claim could be written now (redisstore.Store.Health);
	// nil for stores without one, where /healthz reads a ticket instead.
	health func(context.Context) error
	// durability is what /healthz reports of the store's persistence
	// (redisstore.Durability), set at startup.
	durability string

	mu   sync.RWMutex
	pins map[string]string // capability -> the pin last read or written here
}

// pinStore keeps capability pins where every gateway on the store sees them.
// *redisstore.Store is one.
type pinStore interface {
	Pin(ctx context.Context, capability string) (provider string, ok bool, err error)
	SetPin(ctx context.Context, capability, provider string) (previous string, err error)
	InitPin(ctx context.Context, capability, provider string) (pin string, err error)
}

// newServer serves cfg on store. Pins are read from and written to pins;
// with nil pins (tests of other parts only) they stay in this process.
func newServer(cfg *config, store idempotency.Store, pins pinStore, log *slog.Logger) *server {
	s := &server{
		cfg:     cfg,
		store:   store,
		pinned:  pins,
		log:     log,
		metrics: newMetrics(),
		redact:  receipt.NewRedactor(slices.Concat(cfg.secrets, cfg.keys)...),
		pins:    map[string]string{},

		storeTimeout: storeReadTimeout,
	}
	for name, c := range cfg.Capabilities {
		s.pins[name] = c.Pin
	}
	if h, ok := store.(interface{ Health(context.Context) error }); ok {
		s.health = h.Health
	}
	s.orch = &retry.Orchestrator{
		Store:  newTimedStore(store, s.metrics.storeSeconds),
		Policy: cfg.Policy,
		OnClaim: func(_ *retry.Call, st idempotency.ClaimStatus) {
			s.metrics.claims.WithLabelValues(string(st)).Inc()
		},
		OnAttempt: func(c *retry.Call, n int, res retry.Result, d time.Duration) {
			s.metrics.attempts.WithLabelValues(string(res.Phase)).Inc()
			s.metrics.attemptSeconds.WithLabelValues(string(res.Phase)).Observe(d.Seconds())
			attrs := [...]slog.Attr{slog.String("workspace", c.Scope.Workspace), slog.String("tool", c.Scope.Tool),
				slog.String("key", c.Key.String()), slog.Int("attempt", n), slog.String("phase", string(res.Phase)),
				slog.Int("status", res.Status), slog.Duration("elapsed", d), {}}
			logged := attrs[:len(attrs)-1]
			if res.Err != nil {
				attrs[len(attrs)-1] = slog.String("error", s.redact.String(res.Err.Error()))
				logged = attrs[:]
			}
			s.log.LogAttrs(context.Background(), slog.LevelInfo, "attempt", logged...)
		},
		OnStoreError: func(c *retry.Call, op string, err error) {
			s.metrics.storeErrors.WithLabelValues(op).Inc()
			s.log.Warn("store error", "op", op, "tool", c.Scope.Tool, "key", c.Key.String(), "error", s.redact.String(err.Error()))
		},
		ClaimWait:        storeReadTimeout,
		ClaimRecoveryFor: cfg.UnknownRetention,
		OnClaimRecovery:  s.claimRecovery,
	}
	gw, err := mcpgateway.New(s.gatewayConfig())
	if err != nil {
		// loadConfig checked everything New checks.
		panic("refserver: " + err.Error())
	}
	s.gw = gw
	return s
}

// gatewayConfig is the MCP gateway of cfg, its hooks wired to the server's
// log, metrics, pins and tracer.
func (s *server) gatewayConfig() mcpgateway.Config {
	gc := mcpgateway.Config{
		Orchestrator: s.orch,
		Authenticate: s.cfg.workspace,
		Name:         "obol-refserver",
		Logger:       s.log,
		Redact:       s.redact.String,
		OutOfMemory:  outOfMemory,
		OnRefusal:    func(reason string) { s.metrics.refusals.WithLabelValues(reason).Inc() },
		OnFrontRefusal: func(reason string, status int) {
			s.logFrontRefusal(refusal{reason: reason, status: status})
		},
		OnProbe:      func(string) { s.metrics.probes.Inc() },
		OnStoreError: func(op string) { s.metrics.storeErrors.WithLabelValues(op).Inc() },
		OnCall:       s.onCall,
		Pin:          s.currentPin,

		DefaultQuota:      s.cfg.Quotas.Default,
		Quotas:            s.cfg.Quotas.Workspaces,
		StoreFullFraction: s.cfg.Quotas.StoreFullFraction,
		OnQuotaError:      func(op string, _ error) { s.metrics.storeErrors.WithLabelValues("quota_" + op).Inc() },
	}
	if qs, ok := s.store.(mcpgateway.QuotaStore); ok {
		gc.QuotaStore = qs
	} else {
		// A store that keeps no fleet-wide counts (tests of other parts):
		// only the per-gateway limit holds.
		gc.DefaultQuota = mcpgateway.Quota{InFlight: gc.DefaultQuota.InFlight}
		gc.Quotas = map[string]mcpgateway.Quota{}
		for ws, q := range s.cfg.Quotas.Workspaces {
			gc.Quotas[ws] = mcpgateway.Quota{InFlight: q.InFlight}
		}
	}
	for _, name := range s.cfg.ToolOrder {
		if t := s.cfg.Tools[name]; t != nil {
			gc.Tools = append(gc.Tools, t.gatewayTool())
		} else {
			c := s.cfg.Capabilities[name]
			gc.Capabilities = append(gc.Capabilities, mcpgateway.Capability{Name: c.Name, Description: c.Description,
				Providers: c.Providers, Pin: c.Pin, InputSchema: c.Schema})
		}
	}
	return gc
}

func (t *tool) gatewayTool() mcpgateway.Tool {
	return mcpgateway.Tool{Spec: t.Spec, Description: t.Description, InputSchema: t.Schema,
		Connection: t.Connection, Route: t.Route, Target: t.Target}
}

// onCall counts and traces one tools/call.
func (s *server) onCall(ctx context.Context, c mcpgateway.CallStart) (context.Context, func(mcpgateway.CallEnd)) {
	ctx, span := s.startSpan(ctx, c)
	return ctx, func(e mcpgateway.CallEnd) {
		label := e.Refusal
		if e.Refusal == "quota_exceeded" {
			s.metrics.quotaRefusals.WithLabelValues(e.Workspace).Inc()
		}
		if e.Receipt != nil {
			label = string(e.Receipt.Outcome)
			s.metrics.outcomes.WithLabelValues(label).Inc()
			if e.Receipt.Replayed {
				s.metrics.replays.Inc()
			}
		}
		s.metrics.callSeconds.WithLabelValues(label).Observe(e.Elapsed.Seconds())
		if span != nil {
			span(e)
		}
	}
}

// claimRecovery counts and logs a claim settled in the background.
func (s *server) claimRecovery(c *retry.Call, ev retry.ClaimRecovery) {
	s.metrics.claimRecoveries.WithLabelValues(string(ev)).Inc()
	switch ev {
	case retry.RecoveryStarted:
		s.metrics.claimRecovering.Inc()
		return
	case retry.RecoveryDropped:
		s.log.Warn("claim not settled: too many in the background", "tool", c.Scope.Tool, "key", c.Key.String())
		return
	}
	s.metrics.claimRecovering.Dec()
	s.log.Info("claim settled in the background", "tool", c.Scope.Tool, "key", c.Key.String(), "result", string(ev))
}

// handler routes every endpoint.
func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/mcp", s.gw)
	// Every admin endpoint runs under the store bound: a Redis that is down
	// answers 503 store_unavailable in time, never a request that hangs.
	mux.Handle("POST /v1/approvals/{ticket}/approve", s.bounded(s.handleDecide(true)))
	mux.Handle("POST /v1/approvals/{ticket}/deny", s.bounded(s.handleDecide(false)))
	mux.Handle("GET /v1/receipts/{key}", s.bounded(http.HandlerFunc(s.handleReceipt)))
	mux.Handle("POST /v1/capabilities/{name}/pin", s.bounded(http.HandlerFunc(s.handlePin)))
	mux.Handle("GET /v1/unknown", s.bounded(http.HandlerFunc(s.handleListUnknown)))
	mux.Handle("POST /v1/receipts/{key}/resolve", s.bounded(http.HandlerFunc(s.handleResolve)))
	mux.Handle("POST /v1/store/acknowledge-data-loss", s.bounded(http.HandlerFunc(s.handleAcknowledgeDataLoss)))
	mux.Handle("GET /healthz", s.bounded(http.HandlerFunc(s.handleHealth)))
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	return mux
}

func (s *server) known(name string) bool {
	return s.cfg.Tools[name] != nil || s.cfg.Capabilities[name] != nil
}

// pin is the pin last read or written by this process: what a receipt falls
// back to. Calls read the shared pin with currentPin.
func (s *server) pin(capName string) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.pins[capName]
}

func (s *server) setLocalPin(capName, provider string) {
	s.mu.Lock()
	s.pins[capName] = provider
	s.mu.Unlock()
}

// currentPin reads the shared pin of a capability for the gateway (one GET
// before its claim; the store bounds it by storeReadTimeout), or this
// process's pin without a shared store. The gateway refuses a pin that is
// not one of the capability's providers.
func (s *server) currentPin(ctx context.Context, capName string) (string, bool, error) {
	if s.pinned == nil {
		return s.pin(capName), true, nil
	}
	p, ok, err := s.pinned.Pin(ctx, capName)
	if err != nil {
		return "", false, err
	}
	if !ok {
		p = s.cfg.Capabilities[capName].Pin
	}
	if slices.Contains(s.cfg.Capabilities[capName].Providers, p) {
		s.setLocalPin(capName, p)
	}
	return p, true, nil
}

// seedPins stores each configured pin unless a pin is stored already (SET
// NX), so a restart keeps a pin changed through the endpoint, and logs every
// pin kept from the store. The configured "pin" is only the initial value:
// to return to it, post it. The embedded store behaves the same within its
// one process.
func (s *server) seedPins(ctx context.Context) error {
	if s.pinned == nil {
		return nil
	}
	for _, name := range s.cfg.ToolOrder {
		c := s.cfg.Capabilities[name]
		if c == nil {
			continue
		}
		p, err := s.pinned.InitPin(ctx, name, c.Pin)
		if err != nil {
			return fmt.Errorf("refserver: pin of %s: %w", name, err)
		}
		switch {
		case !slices.Contains(c.Providers, p):
			s.log.Warn("stored capability pin is not a provider here: calls are refused until it is pinned again",
				"capability", name, "pin", p, "configured", c.Pin)
		case p != c.Pin:
			s.log.Info("capability pin kept from the store", "capability", name, "pin", p, "configured", c.Pin)
		}
		s.setLocalPin(name, p)
	}
	return nil
}

// refusal is a request refused: on /v1 {"reason", "status", "message"}
// (restError), with the reasons of the gateway's (mcpgateway.Refusal), plus
// already_decided (409) for a ticket decided the other way.
type refusal struct {
	reason string
	status int
	msg    string // what the caller reads
	detail string // the error's own text, redacted: for the log only
}

// classify maps a store or orchestrator error to its refusal, as the MCP
// endpoint does.
func (s *server) classify(err error) refusal {
	r := s.gw.Classify(err)
	return refusal{reason: r.Reason, status: r.Status, msg: r.Message, detail: r.Detail}
}

// logText is what the server logs of r: the error's text if it came from
// one, else the message.
func (r refusal) logText() string {
	if r.detail != "" {
		return r.detail
	}
	return r.msg
}

// outOfMemory reports whether err holds Redis's OOM error reply (a write
// refused over maxmemory, also from inside a script).
func outOfMemory(err error) bool {
	var re *rueidis.RedisError
	return errors.As(err, &re) && strings.Contains(re.Error(), "OOM ")
}

// inputSchema is a tool's input schema (mcpgateway.ParseInputSchema).
type inputSchema = mcpgateway.InputSchema

// parseInputSchema checks raw as an input schema of the file; it returns
// why it cannot be one, quoting nothing of it.
func parseInputSchema(raw json.RawMessage) (*inputSchema, string) {
	sc, err := mcpgateway.ParseInputSchema(raw)
	if err != nil {
		return nil, strings.TrimPrefix(err.Error(), mcpgateway.ErrInputSchema.Error()+" ")
	}
	return sc, ""
}

// bearerToken is the token of the one Authorization field, as /mcp reads it.
func bearerToken(h http.Header) (string, bool) { return mcpgateway.BearerToken(h) }
