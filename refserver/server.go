package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/mcpgateway"
	"github.com/obol-gateway/obol/mcpgateway/otelhooks"
	"github.com/obol-gateway/obol/receipt"
	"github.com/obol-gateway/obol/retry"
)

// storeReadTimeout bounds every read-only store call (redisstore
// Options.ReadTimeout): the client re-sends a read-only command after network
// errors and LOADING replies until its context ends, and a request's context
// may outlive its client, so reads must fail closed in time. It bounds every
// store call of an admin request too (admin.Config.StoreTimeout), and how long a
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

	pinned idempotency.PinStore // where pins are shared; nil keeps them in this process

	// storeTimeout bounds the store calls of every admin request
	// (admin.Config.StoreTimeout); the store's own ReadTimeout bounds reads everywhere.
	storeTimeout time.Duration

	// durability is what /healthz reports of the store's persistence
	// (redisstore.Description.Durability), set at startup.
	durability string

	mu   sync.RWMutex
	pins map[string]string // capability -> the pin last read or written here
}

// newServer serves cfg on store. Pins are read from and written to pins;
// with nil pins (tests of other parts only) they stay in this process.
func newServer(cfg *config, store idempotency.Store, pins idempotency.PinStore, log *slog.Logger) *server {
	return newTracedServer(cfg, store, pins, log, nil)
}

// newTracedServer is newServer that traces every call with tp, if not nil
// (otelhooks).
func newTracedServer(cfg *config, store idempotency.Store, pins idempotency.PinStore, log *slog.Logger, tp trace.TracerProvider) *server {
	s := &server{
		cfg:     cfg,
		store:   store,
		pinned:  pins,
		log:     log,
		metrics: newMetrics(),
		redact:  receipt.NewRedactor(cfg.Secrets...),
		pins:    map[string]string{},

		storeTimeout: storeReadTimeout,
	}
	for name, c := range cfg.Capabilities {
		s.pins[name] = c.Pin
	}
	s.orch = &retry.Orchestrator{
		Store:  store,
		Policy: cfg.Policy,
		OnAttempt: func(c *retry.Call, n int, res retry.Result, d time.Duration) {
			// A first attempt answered 2xx is the call's tools/call line
			// (its status and attempt count): its own line is Debug. Any
			// other attempt, which a second may follow, is Info.
			level := slog.LevelInfo
			if n == 1 && res.Phase == retry.Responded && res.Err == nil && res.Status >= 200 && res.Status <= 299 {
				level = slog.LevelDebug
			}
			if !s.log.Enabled(context.Background(), level) {
				return
			}
			attrs := [...]slog.Attr{slog.String("workspace", c.Scope.Workspace), slog.String("tool", c.Scope.Tool),
				slog.String("key", c.Key.String()), slog.Int("attempt", n), slog.String("phase", string(res.Phase)),
				slog.Int("status", res.Status), slog.Duration("elapsed", d), {}}
			logged := attrs[:len(attrs)-1]
			if res.Err != nil {
				attrs[len(attrs)-1] = slog.String("error", s.redact.String(res.Err.Error()))
				logged = attrs[:]
			}
			s.log.LogAttrs(context.Background(), level, "attempt", logged...)
		},
		OnStoreError: func(c *retry.Call, op string, err error) {
			s.log.Warn("store error", "op", op, "tool", c.Scope.Tool, "key", c.Key.String(), "error", s.redact.String(err.Error()))
		},
		ClaimWait:        storeReadTimeout,
		ClaimRecoveryFor: cfg.Store.UnknownRetention,
		MaxAttempts:      cfg.MaxAttempts,
		OnClaimRecovery:  s.claimRecovery,
	}
	gc := cfg.Gateway()
	gc.Orchestrator, gc.Name, gc.Logger, gc.Redact, gc.OutOfMemory, gc.Pin = s.orch, "obol-refserver", log, s.redact.String, outOfMemory, s.currentPin
	gc.OnFrontRefusal = func(reason string, status int) { s.logFrontRefusal(refusal{reason: reason, status: status}) }
	if qs, ok := store.(idempotency.QuotaStore); ok {
		gc.QuotaStore = qs
	} else {
		// A store that keeps no fleet-wide counts (tests of other parts):
		// only the per-gateway limit holds.
		gc.DefaultQuota = mcpgateway.WorkspaceQuota{InFlight: gc.DefaultQuota.InFlight}
		quotas := gc.Quotas
		gc.Quotas = map[string]mcpgateway.WorkspaceQuota{}
		for ws, q := range quotas {
			gc.Quotas[ws] = mcpgateway.WorkspaceQuota{InFlight: q.InFlight}
		}
	}
	for i := range gc.Tools {
		if up := gc.Tools[i].Upstream; up != nil && up.Logger == nil {
			up.Logger = log // what an upstream asked that the gateway refused
		}
	}
	s.metrics.Instrument(&gc)
	if tp != nil {
		otelhooks.Instrument(&gc, tp)
	}
	gw, err := mcpgateway.New(gc)
	if err != nil {
		// loadConfig checked everything New checks.
		panic("refserver: " + err.Error())
	}
	s.gw = gw
	return s
}

// claimRecovery logs a claim settled in the background.
func (s *server) claimRecovery(c *retry.Call, ev retry.ClaimRecovery) {
	switch ev {
	case retry.RecoveryStarted:
	case retry.RecoveryDropped:
		s.log.Warn("claim not settled: too many in the background", "tool", c.Scope.Tool, "key", c.Key.String())
	default:
		s.log.Info("claim settled in the background", "tool", c.Scope.Tool, "key", c.Key.String(), "result", string(ev))
	}
}

// handler routes every endpoint.
func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/mcp", s.gw)
	api := s.adminHandler()
	mux.Handle("/v1/", api)
	mux.Handle("/healthz", api)
	mux.Handle("GET /metrics", s.metricsHandler())
	return mux
}

// metricsHandler serves the metrics, behind the metrics_token when the
// configuration sets one: the series name every workspace, which a caller
// without the token must not learn. A refusal is 401 with a fixed text.
func (s *server) metricsHandler() http.Handler {
	h := s.metrics.Handler()
	if !s.cfg.MetricsTokenRequired() {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tok, ok := mcpgateway.BearerToken(r.Header); !ok || !s.cfg.MetricsToken(tok) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="obol-metrics"`)
			http.Error(w, "missing or wrong metrics token (Authorization: Bearer <metrics_token>)", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
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

// refusal is a request refused at the front door, as the gateway reports
// it (mcpgateway.Config.OnFrontRefusal); the admin API's are its own.
type refusal struct {
	reason string
	status int
}

// outOfMemory reports whether err is the store refusing a write over
// maxmemory.
func outOfMemory(err error) bool { return errors.Is(err, redisstore.ErrOutOfMemory) }

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
