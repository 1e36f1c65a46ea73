package mcpgateway

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/mcpdirect"
	"github.com/obol-gateway/obol/receipt"
	"github.com/obol-gateway/obol/retry"
)

// Default limits of [Config]. Every refusal for a limit is a JSON-RPC error
// that touches no store state.
const (
	defaultMaxRequestBytes   = 1 << 20   // a whole POST /mcp request body
	defaultMaxArgumentBytes  = 256 << 10 // the arguments of one tools/call
	unauthenticatedWorkspace = "local"   // the workspace of a gateway without authentication
	defaultName              = "obol-mcpgateway"
	defaultInstructionsIntro = "Every tools/call is idempotent per key: the Idempotency-Key header, or params._meta "
)

// Wire names of DESIGN, section "refserver wire contract".
const (
	MetaKey     = "dev.obol/idempotency-key"
	MetaReceipt = "dev.obol/receipt"
	MetaApprove = "dev.obol/approval"
	MetaTicket  = "dev.obol/approval-ticket"
	HeaderKey   = "Idempotency-Key"
)

// The package's own short names for them.
const (
	metaKey     = MetaKey
	metaReceipt = MetaReceipt
	metaApprove = MetaApprove
	metaTicket  = MetaTicket
	headerKey   = HeaderKey
)

// Tool is one tool the gateway serves through the idempotency core.
type Tool struct {
	// Spec is the tool's EffectSpec; Spec.Tool is the tool's name.
	Spec effectspec.Spec
	// Description is what tools/list shows, followed by how to retry. If
	// empty, one is generated from Spec.
	Description string
	// InputSchema checks every call's arguments inside the claim. If nil,
	// any arguments object passes and tools/list shows {"type": "object"}.
	InputSchema *InputSchema
	// Connection is the scope's connection segment (DESIGN, section "Scope
	// and the Redis key"): the connection id of a native tool, the broker id
	// of a federated one, the server's connection id of an in-process one.
	Connection string
	// Route is the dispatch facts the claim pins; build it with
	// [idempotency.NewRoute].
	Route idempotency.Route
	// Target sends one attempt: a [retry.HTTPTarget], a broker's, an
	// in-process handler's ([InProcess]), or an upstream MCP server's tool
	// ([retry.MCPUpstream.Target]).
	Target retry.Target
	// Upstream is the upstream MCP server Target calls, if any: its tools/list
	// gives the tool's description, schema and annotations ([Gateway.Import]),
	// and its answers are rendered as the upstream's results.
	Upstream *retry.MCPUpstream
}

// Capability is a cap.* tool: a stable name over interchangeable providers,
// each one of [Config.Tools].
type Capability struct {
	Name        string
	Description string // if empty, one naming the providers
	Providers   []string
	// Pin is the provider a call runs when [Config.Pin] is nil or finds
	// no stored pin.
	Pin string
	// InputSchema checks the arguments before the pinned provider's own.
	// If nil, only the provider's does.
	InputSchema *InputSchema
}

// CallStart is what the gateway knows of a tools/call before it runs it.
type CallStart struct {
	Tool      string
	Workspace string
	KeySource idempotency.KeySource
	Header    http.Header // the HTTP request's header
}

// CallEnd is how a tools/call ended: a refusal or a receipt. With a
// receipt, CallStart.KeySource is the receipt's: a resume that sends only
// its ticket runs under the key of the held call, whose source the record
// keeps.
type CallEnd struct {
	CallStart
	Key     string
	Elapsed time.Duration
	// Refusal is the reason of a refused call, "" when Receipt is set.
	Refusal string
	Receipt *receipt.Receipt
}

// Config is what [New] builds a [Gateway] from. Zero fields take the
// defaults their comments name.
type Config struct {
	// Orchestrator runs every call; required. Its Store also resolves
	// approval tickets.
	Orchestrator *retry.Orchestrator
	Tools        []Tool
	Capabilities []Capability
	// Authenticate maps a bearer token to its workspace. If nil and
	// Verifier is nil, there is no authentication: every request is
	// served in Workspace.
	Authenticate func(token string) (workspace string, ok bool)
	// Verifier is the go-sdk's token check; the workspace is its
	// TokenInfo.UserID. Set at most one of Authenticate and Verifier.
	Verifier auth.TokenVerifier
	// Workspace is the workspace without authentication. If empty,
	// "local".
	Workspace string
	// Pin reads the provider a capability is pinned to now, ok false when
	// none is stored (the capability's own Pin then). If nil, every call
	// of a capability runs its Pin.
	Pin func(ctx context.Context, capability string) (provider string, ok bool, err error)
	// Name and Version are the MCP server's implementation. If empty,
	// "obol-mcpgateway" and "0.1.0".
	Name, Version string
	// MaxBodyBytes bounds a POST /mcp request's body (if zero, 1 MiB),
	// MaxArgumentBytes a call's arguments (if zero, 256 KiB).
	MaxBodyBytes, MaxArgumentBytes int
	// Logger receives a line per call and refusal, with the key and never
	// an argument, and New's warnings: a tool that the Orchestrator's
	// Policy denies on every new call (a zero Policy is production, which
	// denies a write the vendor cannot deduplicate, an in_process tool
	// among them) is served, for its replays, and warned of. To run such a
	// tool, set Orchestrator.Policy: Environment development, staging or
	// test, or AllowUnsupportedWrites. If nil, nothing is logged.
	Logger *slog.Logger
	// Redact scrubs secrets from what is logged of an error. If nil, the
	// text is logged as is: set it when any error may hold a secret.
	Redact func(string) string
	// OutOfMemory reports whether a store error is the store refusing
	// writes for lack of memory (answered out_of_memory). If nil, none is.
	OutOfMemory func(error) bool
	// OnRefusal is called with the reason of every refusal, of the
	// front's and of calls. If nil, nothing is called.
	OnRefusal func(reason string)
	// OnFrontRefusal is called with the reason and HTTP status of every
	// request the front refuses before it is read as a call (transport,
	// authentication, envelope, key), after OnRefusal: a gateway logs
	// these, which no call log line shows. If nil, nothing is called.
	OnFrontRefusal func(reason string, status int)
	// OnProbe is called for a GET or DELETE on the endpoint, a client's
	// probe for a stream or a session's end, answered 405 and counted
	// neither as a refusal nor as a call. If nil, nothing is called.
	OnProbe func(method string)
	// OnStoreError is called when a store read of the front (op "ticket",
	// "pin") fails. If nil, nothing is called.
	OnStoreError func(op string)
	// OnCall is called when a tools/call starts, for a span; the returned
	// function, if not nil, when it ends: for a call the front answers
	// itself (docs/DESIGN.md, "refserver wire contract"), once the answer
	// has been flushed to the client, so a client may see the answer
	// before the end runs. The call's log line is written then too. If
	// nil, nothing is called.
	OnCall func(ctx context.Context, c CallStart) (context.Context, func(CallEnd))

	// DefaultQuota is the [WorkspaceQuota] of every workspace not in Quotas; zero
	// is unlimited. Quotas are decided without a store call on a call's
	// path (docs/DESIGN.md, "refserver wire contract").
	DefaultQuota WorkspaceQuota
	Quotas       map[string]WorkspaceQuota
	// QuotaStore leases tokens and reads stored bytes and the store's
	// memory in the background; required by CallsPerSecond and
	// StoredBytes. With one, new records are refused store_full while the
	// store's memory is above StoreFullFraction of its maxmemory.
	QuotaStore idempotency.QuotaStore
	// StoreFullFraction is the headroom kept for finalizes, renewals and
	// settles: above 0, at most 1. If zero, DefaultStoreFullFraction.
	StoreFullFraction float64
	// OnQuotaError is called when a background store call of quotas fails
	// (op "take_tokens", "stored_bytes", "memory_fraction"). If nil,
	// nothing is called.
	OnQuotaError func(op string, err error)
}

// Gateway serves MCP (POST /mcp, Streamable HTTP, stateless, JSON answers)
// with every tools/call claimed, replayed and receipted by the core.
type Gateway struct {
	cfg   Config
	orch  *retry.Orchestrator
	tools map[string]*Tool
	// dispatch holds each tool's Spec, Route and Target as checked once
	// at New; a call names it (retry.Call.Dispatch) instead of re-checking.
	dispatch map[string]*retry.Dispatch
	caps     map[string]*Capability
	// views are each tool's listing and schema, which Import replaces.
	views    map[string]*atomic.Pointer[toolView]
	importMu sync.Mutex
	order    []string
	plain    map[string]bool // tools added with AddTool: outside the contract
	log      *slog.Logger
	sdkLog   *slog.Logger
	mcp      *mcp.Server
	handler  http.Handler
	quotas   *quotas // nil: nothing is limited

	// direct answers the tools/call the front can answer itself.
	direct *mcpdirect.Server
}

// New checks cfg and builds its gateway. A tool without a Route of every
// fact ([idempotency.Route.Check]) or Target, with an Upstream whose Route
// names no upstream tool, or whose Spec, Route and Target
// [retry.NewDispatch] refuses, a capability whose provider is not a tool,
// or a repeated name is an error.
func New(cfg Config) (*Gateway, error) {
	if cfg.Orchestrator == nil {
		return nil, fmt.Errorf("%w: Orchestrator is required", ErrInvalidConfig)
	}
	if cfg.Authenticate != nil && cfg.Verifier != nil {
		return nil, fmt.Errorf("%w: set Authenticate or Verifier, not both", ErrInvalidConfig)
	}
	if cfg.Workspace == "" {
		cfg.Workspace = unauthenticatedWorkspace
	}
	if cfg.Name == "" {
		cfg.Name = defaultName
	}
	if cfg.Version == "" {
		cfg.Version = "0.1.0"
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = defaultMaxRequestBytes
	}
	if cfg.MaxArgumentBytes <= 0 {
		cfg.MaxArgumentBytes = defaultMaxArgumentBytes
	}
	if cfg.Redact == nil {
		cfg.Redact = func(s string) string { return s }
	}
	g := &Gateway{cfg: cfg, orch: cfg.Orchestrator, tools: map[string]*Tool{}, dispatch: map[string]*retry.Dispatch{}, caps: map[string]*Capability{}, plain: map[string]bool{},
		views: map[string]*atomic.Pointer[toolView]{}}
	if err := checkQuotas(&cfg); err != nil {
		return nil, err
	}
	g.log = cfg.Logger
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	// The SDK logs every session at Info; it gets warnings only.
	g.sdkLog = slog.New(warnOnly{g.log.Handler()})
	// A tool the policy denies on every new call is served anyway: a key
	// whose record is final still replays (DESIGN 4). Said once, here.
	for _, t := range cfg.Tools {
		if err := cfg.Orchestrator.Policy.Check(t.Spec); err != nil {
			env := cfg.Orchestrator.Policy.Environment
			if env == "" {
				env = effectspec.Production // the zero Policy's
			}
			g.log.Warn("the policy denies every new call of this tool (policy_denied); set Orchestrator.Policy to allow it",
				"tool", t.Spec.Tool, "binding", string(t.Spec.Idempotency.Kind), "environment", string(env))
		}
	}
	for i := range cfg.Tools {
		t := &cfg.Tools[i]
		name := t.Spec.Tool
		switch {
		case name == "":
			return nil, fmt.Errorf("%w: tool %d has no Spec.Tool", ErrInvalidConfig, i)
		case g.tools[name] != nil:
			return nil, fmt.Errorf("%w: tool %s is listed twice", ErrInvalidConfig, name)
		case t.Target == nil:
			return nil, fmt.Errorf("%w: tool %s has no Target", ErrInvalidConfig, name)
		case t.Upstream != nil && t.Route.UpstreamTool == "":
			return nil, fmt.Errorf("%w: tool %s has an Upstream but its Route names no upstream tool", ErrInvalidConfig, name)
		}
		if err := t.Route.Check(); err != nil {
			return nil, fmt.Errorf("%w: tool %s: %w", ErrInvalidConfig, name, err)
		}
		d, err := retry.NewDispatch(t.Spec, t.Route, t.Target)
		if err != nil {
			return nil, fmt.Errorf("%w: tool %s: %w", ErrInvalidConfig, name, err)
		}
		g.tools[name], g.dispatch[name] = t, d
		g.order = append(g.order, name)
		v := &toolView{schema: t.InputSchema, unavailable: t.Upstream != nil && t.InputSchema == nil}
		v.def = g.listing(name, t, t.Description, t.InputSchema, nil, "")
		g.views[name] = &atomic.Pointer[toolView]{}
		g.views[name].Store(v)
	}
	for i := range cfg.Capabilities {
		c := &cfg.Capabilities[i]
		if c.Name == "" || g.tools[c.Name] != nil || g.caps[c.Name] != nil {
			return nil, fmt.Errorf("%w: capability %d has no name or a name listed twice", ErrInvalidConfig, i)
		}
		for _, p := range c.Providers {
			if g.tools[p] == nil {
				return nil, fmt.Errorf("%w: capability %s: provider %s is not a tool", ErrInvalidConfig, c.Name, p)
			}
		}
		if !slices.Contains(c.Providers, c.Pin) {
			return nil, fmt.Errorf("%w: capability %s: Pin is not one of its providers", ErrInvalidConfig, c.Name)
		}
		g.caps[c.Name] = c
		g.order = append(g.order, c.Name)
	}
	g.direct = mcpdirect.New(g.callDirect, tokenExtraCall)
	g.mcp = g.newMCPServer()
	g.handler = g.mcpHandler(g.mcp)
	// Last: it starts goroutines, which Close stops.
	g.quotas = newQuotas(&cfg)
	return g, nil
}

// Close stops the background work of quotas (leasing tokens, reading the
// store's memory and stored bytes); call it at shutdown, after the last
// call.
func (g *Gateway) Close() {
	if g.quotas != nil {
		g.quotas.close()
	}
}

// AddTool adds a tool outside the idempotency contract (a read that needs
// no key, such as a count): its handler runs on every call, with no claim
// and no receipt. Call it before serving.
func (g *Gateway) AddTool(t *mcp.Tool, h mcp.ToolHandler) {
	g.plain[t.Name] = true
	g.mcp.AddTool(t, h)
}

// ServeHTTP serves POST /mcp.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) { g.handler.ServeHTTP(w, r) }

// mcpHandler serves m on POST /mcp behind the front. The SDK handler runs
// stateless (no Mcp-Session-Id), so any number of gateway processes can
// serve one client behind a load balancer: every state that matters is in
// the store. Answers are application/json rather than an SSE stream. A
// client may call tools/call without initialize.
func (g *Gateway) mcpHandler(m *mcp.Server) http.Handler {
	return g.mcpHandlerDirect(m, m == g.mcp)
}

// mcpHandlerDirect is mcpHandler; with direct, the front answers a
// tools/call of the gateway's own tools itself ([mcpdirect.Server.Serve]).
func (g *Gateway) mcpHandlerDirect(m *mcp.Server, direct bool) http.Handler {
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return m }, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		JSONResponse:        true,
		MaxRequestBodyBytes: int64(g.cfg.MaxBodyBytes),
		Logger:              g.sdkLog,
	})
	// The front is the one place that maps a token to a workspace (it must
	// answer 401 as a JSON-RPC error and refuse a repeated Authorization
	// field, which the SDK's middleware would not). This verifier only
	// hands the front's result to the SDK, which attaches it to every
	// request it gives a tool handler: that is how the call's workspace
	// and effective key reach the handler.
	bearer := auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		ci, ok := ctx.Value(callInfoKey{}).(*callInfo)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: ci.workspace, Extra: map[string]any{tokenExtraCall: ci}}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	return g.front(bearer(sdk), direct)
}

// workspace authenticates r: its workspace, or false for a 401.
func (g *Gateway) workspace(r *http.Request) (string, bool) {
	if g.cfg.Authenticate == nil && g.cfg.Verifier == nil {
		if len(r.Header.Values("Authorization")) > 1 {
			return "", false
		}
		return g.cfg.Workspace, true
	}
	tok, ok := BearerToken(r.Header)
	if !ok {
		return "", false
	}
	if g.cfg.Authenticate != nil {
		return g.cfg.Authenticate(tok)
	}
	ti, err := g.cfg.Verifier(r.Context(), tok, r)
	if err != nil || ti == nil || ti.UserID == "" {
		return "", false
	}
	return ti.UserID, true
}

func (g *Gateway) newMCPServer() *mcp.Server {
	m := mcp.NewServer(&mcp.Implementation{Name: g.cfg.Name, Version: g.cfg.Version}, &mcp.ServerOptions{
		Instructions: defaultInstructionsIntro + metaKey +
			" for a client that cannot set headers. Send the same key again to retry safely; see the receipt in result _meta " + metaReceipt + ".",
		Logger: g.sdkLog,
	})
	// unknown_tool with the reason, status and key in error.data, which the
	// SDK's own "unknown tool" error lacks. The message never names the
	// tool: it is part of the request.
	m.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if ctr, ok := req.(*mcp.CallToolRequest); ok && method == "tools/call" {
				if ctr.Params == nil || !g.known(ctr.Params.Name) && !g.plain[ctr.Params.Name] {
					key := ""
					if ci := callInfoOf(ctr); ci != nil {
						key = ci.key.String()
					}
					g.refused("unknown_tool")
					return nil, rpcError(refusal{reason: "unknown_tool", status: http.StatusNotFound, msg: "unknown tool"}, key)
				}
			}
			return next(ctx, method, req)
		}
	})
	for _, name := range g.order {
		m.AddTool(g.toolDef(name), g.callTool)
	}
	return m
}

func (g *Gateway) known(name string) bool { return g.tools[name] != nil || g.caps[name] != nil }

func (g *Gateway) refused(reason string) {
	if g.cfg.OnRefusal != nil {
		g.cfg.OnRefusal(reason)
	}
}

// toolDef is what tools/list shows of a tool or capability: its configured
// description (a generated one without it) followed by retryNote, input schema as inputSchema
// ({"type": "object"} without one), and hints derived from its EffectSpec.
// A capability's hints come from its providers (readOnlyHint only when all
// of them read); its description and schema are its own entry's, never a
// provider's, since the pin can change while tools/list is cached.
func (g *Gateway) toolDef(name string) *mcp.Tool {
	if v := g.views[name]; v != nil {
		return v.Load().def
	}
	def := &mcp.Tool{Name: name, InputSchema: objectSchemaRaw()}
	var specs []effectspec.Spec
	{
		c := g.caps[name]
		def.Description = c.Description
		if def.Description == "" {
			def.Description = fmt.Sprintf("capability served by one of %s (pinned provider decides)", strings.Join(c.Providers, ", "))
		}
		if c.InputSchema != nil {
			def.InputSchema = c.InputSchema.raw
		}
		for _, p := range c.Providers {
			specs = append(specs, g.tools[p].Spec)
		}
	}
	def.Annotations = annotations(specs)
	def.Description = strings.TrimSpace(def.Description) + " " + RetryNote
	return def
}

// RetryNote ends every tool's description: agents retry, and a retry under
// a fresh key is the one that runs a call twice.
const RetryNote = "Retry: call again with the same Idempotency-Key (or _meta " + metaKey + "); a finished call replays, never runs twice. " +
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

// currentPin reads the pin of a capability (one read before its claim), or
// its configured Pin when none is stored. A store failure refuses the call
// with store_unavailable before any claim or dispatch, and a pin that is
// not one of the capability's providers here (a configuration that dropped
// it) with internal: both fail closed rather than route elsewhere than the
// other gateways.
func (g *Gateway) currentPin(ctx context.Context, capName string) (string, *refusal) {
	c := g.caps[capName]
	if g.cfg.Pin == nil {
		return c.Pin, nil
	}
	p, ok, err := g.cfg.Pin(ctx, capName)
	if err != nil {
		r := g.classify(err)
		if r.reason == "store_unavailable" && g.cfg.OnStoreError != nil {
			g.cfg.OnStoreError("pin")
		}
		g.log.Warn("capability pin unreadable", "capability", capName, "error", r.logText())
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
	return p, nil
}

// warnOnly passes on records of level Warn and above.
type warnOnly struct{ slog.Handler }

func (h warnOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}

func (h warnOnly) WithAttrs(as []slog.Attr) slog.Handler { return warnOnly{h.Handler.WithAttrs(as)} }
func (h warnOnly) WithGroup(g string) slog.Handler       { return warnOnly{h.Handler.WithGroup(g)} }
