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

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/rueidis"
	"go.opentelemetry.io/otel/trace"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/receipt"
	"github.com/obol-gateway/obol/retry"
)

// Request limits. Every refusal for a limit is a JSON-RPC error that touches
// no store state.
const (
	maxBodyBytes  = 1 << 20   // a whole POST /mcp body
	maxArgBytes   = 256 << 10 // the arguments of one tools/call
	maxAdminBytes = 64 << 10  // a /v1 request body
)

// storeReadTimeout bounds every read-only store call (redisstore
// Options.ReadTimeout): the client re-sends a read-only command after network
// errors and LOADING replies until its context ends, and a request's context
// may outlive its client, so reads must fail closed in time. It bounds every
// store call of an admin request too (server.bounded), and how long a
// tools/call waits for its claim before store_unavailable
// (retry.Orchestrator.ClaimWait): one figure for every answer a stalled
// Redis delays.
const storeReadTimeout = 2 * time.Second

// Wire names of docs/DESIGN.md, "refserver wire contract".
const (
	metaKey     = "dev.obol/idempotency-key"
	metaReceipt = "dev.obol/receipt"
	metaApprove = "dev.obol/approval"
	metaTicket  = "dev.obol/approval-ticket"
	headerKey   = "Idempotency-Key"
)

// server is the reference gateway: the MCP endpoint, the approval,
// capability and receipt endpoints, health and metrics.
type server struct {
	cfg     *config
	store   idempotency.Store
	orch    *retry.Orchestrator
	log     *slog.Logger
	sdkLog  *slog.Logger // the SDK logs every session at Info; it gets warnings only
	metrics *metrics
	// redact scrubs every configured secret and key (connection and
	// broker secrets, API keys, approver keys) from log lines, refusal
	// messages and settlement notes.
	redact receipt.Redactor
	mcp    *mcp.Server
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
		sdkLog:  slog.New(warnOnly{log.Handler()}),
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
	s.mcp = s.newMCPServer()
	return s
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
	mux.Handle("/mcp", s.mcpHandler(s.mcp))
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

// mcpHandler serves m on POST /mcp behind the front. The SDK handler runs
// stateless (no Mcp-Session-Id), so any number of refserver processes can
// serve one client behind a load balancer: every state that matters is in
// Redis. Answers are application/json rather than an SSE stream. A client
// may call tools/call without initialize.
func (s *server) mcpHandler(m *mcp.Server) http.Handler {
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return m }, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		JSONResponse:        true,
		MaxRequestBodyBytes: maxBodyBytes,
		Logger:              s.sdkLog,
	})
	// The front is the one place that maps an API key to a workspace (it
	// must answer 401 as a JSON-RPC error and refuse a repeated
	// Authorization field, which the SDK's middleware would not). This
	// verifier only hands the front's result to the SDK, which attaches it
	// to every request it gives a tool handler: that is how the call's
	// workspace and effective key reach the handler.
	bearer := auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		ci, ok := ctx.Value(callInfoKey{}).(*callInfo)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: ci.workspace, Extra: map[string]any{tokenExtraCall: ci}}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	return s.mcpFront(bearer(sdk))
}

func (s *server) newMCPServer() *mcp.Server {
	m := mcp.NewServer(&mcp.Implementation{Name: "obol-refserver", Version: "0.1.0"}, &mcp.ServerOptions{
		Instructions: "Every tools/call is idempotent per key: the Idempotency-Key header, or params._meta " + metaKey +
			" for a client that cannot set headers. Send the same key again to retry safely; see the receipt in result _meta " + metaReceipt + ".",
		Logger: s.sdkLog,
	})
	// unknown_tool with the reason, status and key in error.data, which the
	// SDK's own "unknown tool" error lacks. The message never names the
	// tool: it is part of the request.
	m.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if ctr, ok := req.(*mcp.CallToolRequest); ok && method == "tools/call" {
				if ctr.Params == nil || !s.known(ctr.Params.Name) {
					key := ""
					if ci := callInfoOf(ctr); ci != nil {
						key = ci.key.String()
					}
					s.metrics.refusals.WithLabelValues("unknown_tool").Inc()
					return nil, rpcError(refusal{reason: "unknown_tool", status: http.StatusNotFound, msg: "unknown tool"}, key)
				}
			}
			return next(ctx, method, req)
		}
	})
	for _, name := range s.cfg.ToolOrder {
		m.AddTool(s.toolDef(name), s.traced(s.callTool))
	}
	return m
}

func (s *server) known(name string) bool {
	return s.cfg.Tools[name] != nil || s.cfg.Capabilities[name] != nil
}

// toolDef is what tools/list shows of a tool or capability: its configured
// description (a generated one without it) followed by retryNote, input schema as inputSchema
// ({"type": "object"} without one), and hints derived from its EffectSpec.
// A capability's hints come from its providers (readOnlyHint only when all
// of them read); its description and schema are its own entry's, never a
// provider's, since the pin can change while tools/list is cached.
func (s *server) toolDef(name string) *mcp.Tool {
	def := &mcp.Tool{Name: name, InputSchema: json.RawMessage(objectSchema)}
	var specs []effectspec.Spec
	if t := s.cfg.Tools[name]; t != nil {
		def.Description = t.Description
		if def.Description == "" {
			def.Description = fmt.Sprintf("%s via %s (idempotency binding %s)", effectName(t.Spec), t.Connection, t.Route.Binding)
		}
		if t.Schema != nil {
			def.InputSchema = t.Schema.raw
		}
		specs = append(specs, t.Spec)
	} else {
		c := s.cfg.Capabilities[name]
		def.Description = c.Description
		if def.Description == "" {
			def.Description = fmt.Sprintf("capability served by one of %s (pinned provider decides)", strings.Join(c.Providers, ", "))
		}
		if c.Schema != nil {
			def.InputSchema = c.Schema.raw
		}
		for _, p := range c.Providers {
			specs = append(specs, s.cfg.Tools[p].Spec)
		}
	}
	def.Annotations = annotations(specs)
	def.Description = strings.TrimSpace(def.Description) + " " + retryNote
	return def
}

// retryNote ends every tool's description: agents retry, and a retry under
// a fresh key is the one that runs a call twice.
const retryNote = "Retry: call again with the same Idempotency-Key (or _meta " + metaKey + "); a finished call replays, never runs twice. " +
	"Use a new key only where the receipt or a refusal's error.data says safe_new_key: true; never after outcome_unknown."

// annotations are the hints of a tool whose calls may run any of specs
// (one, or a capability's providers). A read is readOnlyHint; a write is
// idempotentHint, because a repeated call with the same key is answered
// from its record, never sent twice. The other hints keep the defaults of
// the protocol (destructive and open world): a vendor's API may be both.
func annotations(specs []effectspec.Spec) *mcp.ToolAnnotations {
	a := &mcp.ToolAnnotations{ReadOnlyHint: true}
	for _, sp := range specs {
		if sp.Effect != effectspec.EffectRead {
			a.ReadOnlyHint = false
			a.IdempotentHint = true
		}
	}
	return a
}

func effectName(s effectspec.Spec) string {
	if s.Effect == effectspec.EffectRead {
		return "read"
	}
	return "write"
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

// currentPin reads the shared pin of a capability (one GET before its
// claim), or the configured pin when none is stored. A store failure
// refuses the call with store_unavailable before any claim or dispatch, and
// a stored pin that is not one of the capability's providers here (a
// configuration that dropped it) with internal: both fail closed rather
// than route elsewhere than the other gateways.
func (s *server) currentPin(ctx context.Context, capName string) (string, *refusal) {
	c := s.cfg.Capabilities[capName]
	if s.pinned == nil {
		return s.pin(capName), nil
	}
	// The store bounds the read by storeReadTimeout.
	p, ok, err := s.pinned.Pin(ctx, capName)
	if err != nil {
		r := s.classify(err)
		if r.reason == "store_unavailable" {
			s.metrics.storeErrors.WithLabelValues("pin").Inc()
		}
		s.log.Warn("capability pin unreadable", "capability", capName, "error", r.logText())
		return "", &r
	}
	if !ok {
		p = c.Pin
	}
	if !slices.Contains(c.Providers, p) {
		// The stored pin is named in the log only: a caller reads no
		// stored value.
		return "", &refusal{reason: "internal", status: http.StatusInternalServerError,
			msg:    "capability " + capName + " is pinned to a provider that is not one of its providers in this configuration",
			detail: fmt.Sprintf("capability %s is pinned to %s, which is not one of its providers in this configuration; pin it again", capName, p)}
	}
	s.setLocalPin(capName, p)
	return p, nil
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

// refusal is a call refused before or instead of dispatch. On /mcp it is a
// JSON-RPC error with error.data {"reason", "status", "idempotency_key"}
// (rpcError); the /v1 endpoints answer {"reason", "status", "message"}
// (restError) with the same reasons, plus already_decided (409) for a
// ticket decided the other way.
//
// Reasons beyond docs/DESIGN.md, "refserver wire contract": unauthorized (401),
// method_not_allowed (405), method_not_found (404: a JSON-RPC method the
// server does not serve), invalid_request (400), invalid_arguments (400:
// arguments that are not one JSON object, duplicate names, lone
// surrogates, or break the tool's input schema), arguments_too_large (413,
// over maxArgBytes), request_too_large (413), not_found (404: an approval
// ticket that does not exist or belongs to another workspace or tool),
// scope_version_conflict (409 for a record of another scope version; 503
// once the fleet's scope version changed), store_unavailable (503),
// internal (500).
type refusal struct {
	reason string
	status int
	// msg is what the caller reads. For a refusal classified from an error
	// whose text may come from the store (store_unavailable, internal,
	// scope_version_conflict, ...) it is fixed text (tenantText), never
	// the error's.
	msg string
	// detail, if not empty, is the error's own text, redacted: for the
	// server's log only.
	detail string
	// retryAfter, for in_progress: until the running attempt's deadline.
	retryAfter time.Duration
	// denied, for denied: whether a new key is safe, read from the record
	// (retry.DeniedError); nil when it could not be read.
	denied *bool
}

// safeNewKey is error.data.safe_new_key of r (docs/DESIGN.md, "refserver wire
// contract"): true only when nothing under the key may have had an effect,
// false when the call ran or may have run (or the key may hold such a record),
// nil (absent) when this refusal does not know.
func (r refusal) safeNewKey() *bool {
	if r.reason == "denied" {
		return r.denied
	}
	switch safeByReason[r.reason] {
	case safeTrue:
		return receipt.Safe(true)
	case safeFalse:
		return receipt.Safe(false)
	}
	return nil
}

type safeness int

const (
	safeAbsent safeness = iota
	safeFalse
	safeTrue
)

// safeByReason is the table of docs/DESIGN.md, "refserver wire contract" for
// every reason whose answer does not depend on the record (denied does). A
// reason not listed is absent: nothing of the key was read.
var safeByReason = map[string]safeness{
	// The key holds a record whose call ran, may have run or may still.
	"request_mismatch":     safeFalse,
	"in_progress":          safeFalse,
	"destination_conflict": safeFalse,
	"outcome_unknown":      safeFalse,
	"lease_lost":           safeFalse,
	// The key (or the ticket's) may hold a record that nobody read.
	"malformed_key":          safeFalse,
	"approval_key_mismatch":  safeFalse,
	"store_unavailable":      safeFalse,
	"store_data_lost":        safeFalse,
	"scope_version_conflict": safeFalse,
	"internal":               safeFalse,
}

// refusalError carries a refusal decided before the claim through the
// orchestrator (retry.Call.Refuse), so that a final record still replays.
type refusalError struct{ r refusal }

func (e *refusalError) Error() string { return e.r.msg }

// JSON-RPC error codes: -32602 (invalid params) for a call that names no
// tool or carries bad arguments, -32603 for internal and store failures,
// -32000 for every refusal of the idempotency contract. (-32600 and -32700
// are the front's, for a message it refuses: parseEnvelope.)
func (r refusal) code() int64 {
	switch r.reason {
	case "unknown_tool", "invalid_arguments", "arguments_too_large", "invalid_request":
		return -32602
	case "internal", "store_unavailable":
		return -32603
	}
	return -32000
}

// errorData is error.data of every refusal.
type errorData struct {
	Reason         string `json:"reason"`
	Status         int    `json:"status"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// RetryAfterMS, on in_progress: until the running attempt's deadline.
	RetryAfterMS *int64 `json:"retry_after_ms,omitempty"`
	// SafeNewKey: whether calling again under a new key is safe; absent
	// when not known (refusal.safeNewKey).
	SafeNewKey *bool `json:"safe_new_key,omitempty"`
}

func rpcError(r refusal, key string) *jsonrpcError {
	d := errorData{Reason: r.reason, Status: r.status, IdempotencyKey: key, SafeNewKey: r.safeNewKey()}
	if r.reason == "in_progress" {
		ms := r.retryAfter.Milliseconds()
		d.RetryAfterMS = &ms
	}
	data, _ := json.Marshal(d)
	return &jsonrpcError{Code: r.code(), Message: r.msg, Data: data}
}

// classify maps an error of the orchestrator to its wire refusal. The
// caller reads fixed text for every reason but invalid_request,
// invalid_arguments and malformed_key, whose messages this module writes
// from the request alone: a store error's text (a Redis address, "dial tcp ...", an OOM reply
// naming a script and its line) or a stored scope version never reaches a
// tenant. The error's own text, redacted, is the refusal's detail, which
// only the server logs.
func (s *server) classify(err error) refusal {
	var re *refusalError
	if errors.As(err, &re) {
		return re.r
	}
	detail := s.redact.String(err.Error())
	if reason, status := idempotency.Reason(err); reason != "" {
		r := refusal{reason: reason, status: status, msg: detail, detail: detail}
		switch reason {
		case "invalid_request", "invalid_arguments", "malformed_key":
		case "store_unavailable":
			r.msg = storeUnavailableText
			if outOfMemory(err) {
				r.msg = outOfMemoryText
			}
		default:
			r.msg = tenantText(reason, status)
		}
		var ip *retry.InProgressError
		if errors.As(err, &ip) {
			r.retryAfter = ip.RetryAfter
		}
		var de *retry.DeniedError
		if errors.As(err, &de) {
			r.denied = de.SafeNewKey
		}
		return r
	}
	if errors.Is(err, context.DeadlineExceeded) {
		// A store call that ran out of its bound.
		return refusal{reason: "store_unavailable", status: http.StatusServiceUnavailable, msg: storeUnavailableText, detail: detail}
	}
	return refusal{reason: "internal", status: http.StatusInternalServerError, msg: internalText, detail: detail}
}

// The fixed text of store failures. out_of_memory is a store_unavailable
// whose cause is Redis refusing writes for lack of memory: the operator's
// to fix, and retrying at once does not help.
const (
	storeUnavailableText = "store_unavailable: the idempotency store is unavailable; retry with the same key"
	outOfMemoryText      = "out_of_memory: the idempotency store is out of memory; retry later with the same key"
	internalText         = "internal: the gateway failed; retry with the same key"
)

// tenantText is the fixed text of a lifecycle refusal.
func tenantText(reason string, status int) string {
	switch reason {
	case "request_mismatch":
		return "the key was used with other arguments"
	case "in_progress":
		return "a call with this key is in progress"
	case "destination_conflict":
		return "the key's call went to another destination, whose outcome is not known"
	case "approval_key_mismatch":
		return "the key is not the approval ticket's"
	case "outcome_unknown":
		return "an earlier attempt may have reached the vendor, which cannot deduplicate: not sent again"
	case "scope_version_conflict":
		if status == http.StatusServiceUnavailable {
			return "the fleet's key scope version changed: this gateway no longer claims"
		}
		return "the key's record was made under another key scope version"
	case "store_data_lost":
		return "store_data_lost: the idempotency store lost data; no call is dispatched until an operator acknowledges; retry later with the same key"
	case "denied":
		return "the call was denied"
	case "lease_lost":
		return "the call's slot was taken over by another attempt"
	case effectspec.ReasonPolicyDenied:
		return "the policy denies this call: its vendor cannot deduplicate writes"
	case "not_found":
		return "not found"
	case "not_unknown":
		return "the call is not unknown"
	}
	return reason
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

// warnOnly passes on records of level Warn and above.
type warnOnly struct{ slog.Handler }

func (h warnOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}

func (h warnOnly) WithAttrs(as []slog.Attr) slog.Handler { return warnOnly{h.Handler.WithAttrs(as)} }
func (h warnOnly) WithGroup(g string) slog.Handler       { return warnOnly{h.Handler.WithGroup(g)} }
