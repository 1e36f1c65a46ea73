package effectspec

import "time"

// Effect says whether a call changes the world. The zero Effect reads as
// EffectWrite: the cautious reading.
type Effect string

const (
	EffectWrite Effect = "write"
	EffectRead  Effect = "read"
)

// RouteKind says what sends a tool's calls: the gateway itself over HTTP
// (native), a catalog broker (federated), or a handler in the gateway's own
// process (in-process). A spec's route is native or federated (the zero
// RouteKind reads as native); a native spec with an in-process binding runs
// on an in-process route ([BindingKind.InProcess]), which is what the
// idempotency package's Route.Kind reports for it.
type RouteKind string

const (
	RouteNative    RouteKind = "native"
	RouteFederated RouteKind = "federated"
	// RouteInProcess is never a spec's route, only a pinned route's kind.
	RouteInProcess RouteKind = "in_process"
	// RouteMCP is never a spec's route either: a native spec whose calls go
	// to an upstream MCP server (a tools/call per attempt) is pinned with
	// this kind (docs/DESIGN.md, "Request hash and dispatch fingerprint").
	RouteMCP RouteKind = "mcp"
)

// Approval says whether a call must be approved before it is dispatched.
// The zero Approval reads as ApprovalNone.
type Approval string

const (
	ApprovalNone     Approval = "none"
	ApprovalRequired Approval = "required"
)

// BindingKind says how the effective key reaches the vendor. The zero
// BindingKind reads as BindingUnsupported: the vendor cannot deduplicate.
type BindingKind string

const (
	BindingHeader      BindingKind = "header"
	BindingBodyPointer BindingKind = "body_pointer"
	BindingUnsupported BindingKind = "unsupported"
	// BindingInProcess: a handler inside the gateway runs the call and
	// passes no key on. Like unsupported, a call whose outcome is unknown is
	// never run again (DESIGN, section "In-process tools").
	BindingInProcess BindingKind = "in_process"
	// BindingInProcessKeyed: a handler inside the gateway that passes the
	// attempt's key to an idempotent downstream, which deduplicates on it:
	// the rules of a vendor binding (window, redispatch) hold.
	BindingInProcessKeyed BindingKind = "in_process_keyed"
	// BindingMeta: the key reaches an upstream MCP server as the member
	// Binding.Meta (default [DefaultMetaName]) of the tools/call's
	// params._meta, where an Obol-fronted upstream deduplicates on it. Only
	// a tool of an MCP connection may declare it.
	BindingMeta BindingKind = "meta"
)

// DefaultMetaName is the params._meta member a meta binding writes the key
// to when its spec names none: the member an Obol gateway reads a client's
// key from.
const DefaultMetaName = "dev.obol/idempotency-key"

// InProcess reports whether b is run by a handler in the gateway's process.
func (b BindingKind) InProcess() bool { return b == BindingInProcess || b == BindingInProcessKeyed }

// The statuses an in-process attempt reports (retry.Result.Status): its
// spec lists none, and Classify reads these.
const (
	InProcessAccepted = 200 // the handler returned normally
	InProcessRejected = 422 // the handler marked a definite rejection
)

// Propagation is what the gateway actually did with the key on the wire:
// "header", "body_pointer", "handler", "meta" or "none".
type Propagation string

const (
	PropagationHeader      Propagation = "header"
	PropagationBodyPointer Propagation = "body_pointer"
	PropagationNone        Propagation = "none"
	// PropagationHandler: the key was handed to an in-process handler
	// (binding in_process_keyed), which passes it downstream.
	PropagationHandler Propagation = "handler"
	// PropagationMeta: the key was sent in params._meta of an upstream MCP
	// server's tools/call (binding meta).
	PropagationMeta Propagation = "meta"
)

// Outcome is what became of a call: the classification of a vendor response
// ([Spec.Classify] answers Accepted, DefinitelyRejected or Unknown), or, for
// a call not finished or that never reached a vendor, InProgress, Held or
// Denied. A record's state and a receipt's outcome are Outcomes
// (docs/DESIGN.md, "The record and its lifecycle", "Receipt (JSON)").
type Outcome string

const (
	Accepted           Outcome = "accepted"
	DefinitelyRejected Outcome = "definitely_rejected"
	// Unknown: an attempt may have had an effect. It never becomes success.
	Unknown Outcome = "unknown"
	// InProgress: an attempt is reserved under a live lease; its outcome is
	// not known yet.
	InProgress Outcome = "in_progress"
	// Held and Denied describe calls that never reached a vendor: awaiting
	// approval, or denied by an approver.
	Held   Outcome = "held"
	Denied Outcome = "denied"
)

// Final reports whether o is replayed as-is on every later call: Accepted
// or DefinitelyRejected.
func (o Outcome) Final() bool { return o == Accepted || o == DefinitelyRejected }

// Binding is the tool's idempotency binding: how our key reaches the vendor.
type Binding struct {
	Kind BindingKind `json:"binding"`
	// Header names the header of a header binding: a valid RFC 9110 token
	// that is not reserved. Reserved are framing and hop-by-hop headers
	// (Host, Content-Length, Transfer-Encoding, Trailer, TE, Connection,
	// Keep-Alive, Proxy-Connection, Upgrade, Expect), credentials
	// (Authorization, which carries the vendor secret, Proxy-Authorization,
	// Proxy-Authenticate, Cookie) and the headers that say how the body is
	// read (Content-Type, Content-Encoding).
	Header  string `json:"header,omitempty"`
	Pointer string `json:"pointer,omitempty"`
	// Meta names the params._meta member of a meta binding, case-sensitive:
	// an MCP _meta key of at most 128 bytes (an optional prefix of
	// dot-separated labels ending in '/', then a name that starts and ends
	// with a letter or digit, with -_. inside), not under a prefix MCP
	// reserves (a label modelcontextprotocol or mcp) nor under dev.obol/
	// but DefaultMetaName. If empty, DefaultMetaName.
	Meta string `json:"meta,omitempty"`
	// Window is how long the vendor deduplicates on a key (Stripe: 24 hours),
	// for a header, body_pointer, meta or in_process_keyed binding: a slot whose first attempt that may
	// have left is older is never sent again (docs/DESIGN.md, "The record and
	// its lifecycle"). If zero, DefaultVendorWindow; see Spec.VendorWindow. In
	// JSON it is a Go duration string ("24h"), at least 1s and at most 8760h
	// (a year); an unsupported binding (and so a federated route)
	// may not set it.
	Window time.Duration `json:"window,omitempty"`
}

// Statuses lists the vendor statuses of each class. A status in no list is
// Unknown; the zero Statuses accepts nothing.
//
// Codes are 100-599, integer literals in JSON, with no repeats in a list;
// an empty list reads as absent. Accepted and DefinitelyRejected are
// disjoint, and Retryable shares no code with Accepted. Retryable may share
// codes with DefinitelyRejected (retry once, then the rejection is final).
// Retryable on a spec without a vendor binding is valid but inert.
type Statuses struct {
	Accepted           []int `json:"accepted,omitempty"`
	DefinitelyRejected []int `json:"definitely_rejected,omitempty"`
	Retryable          []int `json:"retryable,omitempty"`
	// InUse holds the statuses the vendor answers while a request with the
	// same key is still being processed (Stripe answers 409). They are
	// always Unknown and never retryable: the first request may yet succeed.
	// A code in InUse is in no other list; Classify and Retryable read it
	// so even in a spec that breaks that rule.
	InUse []int `json:"in_use,omitempty"`
	// ToolError is the outcome of an MCP tool result with isError true, for
	// a tool of an MCP connection: DefinitelyRejected or Unknown. If empty,
	// Unknown: an upstream's tool error may follow a partial effect.
	ToolError Outcome `json:"tool_error,omitempty"`
}

const (
	// DefaultAttemptTimeout is how long one attempt may take when a spec
	// sets no Timeout.
	DefaultAttemptTimeout = 30 * time.Second
	// MaxAttemptTimeout is the largest Timeout a spec may set.
	MaxAttemptTimeout = 15 * time.Minute

	// DefaultVendorWindow is how long a vendor is taken to deduplicate on a
	// key when a spec with a vendor binding sets no idempotency.window.
	DefaultVendorWindow = 24 * time.Hour
	// minVendorWindow and maxVendorWindow bound idempotency.window. A window
	// longer than the store's unknown retention changes nothing: the record
	// is gone before it closes.
	minVendorWindow = time.Second
	maxVendorWindow = 365 * 24 * time.Hour

	// DefaultMaxAttempts is a slot's max_attempts when neither its spec
	// nor the gateway's config sets one.
	DefaultMaxAttempts = 10
	// MaxMaxAttempts is the largest max_attempts a spec may set.
	MaxMaxAttempts = 1000
)

// Spec is one tool's EffectSpec. A Spec to dispatch with must come from
// Parse, ParseList or New, which validate it; retry.Orchestrator refuses any
// other with ErrUnvalidated (see Validated) before any claim: a rule that
// was never checked can never decide a dispatch. The zero Spec reads most
// cautiously (a native write with no vendor binding and nothing accepted),
// but it is not validated.
type Spec struct {
	// Tool is 1 to 128 of A-Z a-z 0-9 _ . - (the MCP tool name alphabet),
	// so a name can never be mistaken for another part of a message, a log
	// line or a storage key.
	Tool        string    `json:"tool"`
	Effect      Effect    `json:"effect"`
	Route       RouteKind `json:"route"`
	Idempotency Binding   `json:"idempotency"`
	Status      Statuses  `json:"status"`
	Approval    Approval  `json:"approval"`
	// Timeout is how long one attempt may take, at most MaxAttemptTimeout.
	// If zero, DefaultAttemptTimeout; see AttemptTimeout. In JSON it is a Go
	// duration string such as "30s", "2m" or "1m30s", which Parse reads
	// (encoding/json refuses it rather than lose it). An absent timeout is
	// zero, and json.Marshal leaves a zero one out, so a spec keeps following
	// the default; an explicit "0s" or a negative duration is an error.
	Timeout time.Duration `json:"timeout,omitempty"`
	// MaxAttempts bounds the attempts of one slot (one key's record) that
	// may reach the vendor over the slot's whole life, redispatches of an
	// unknown call included: past it a claim answers outcome_unknown and
	// sends nothing, and an operator settles the record (docs/DESIGN.md,
	// "The record and its lifecycle"). Attempts that provably never left
	// do not count. If zero, the gateway's default (its config's
	// max_attempts, else DefaultMaxAttempts); at most MaxMaxAttempts. In
	// JSON an integer; an explicit 0 is an error (omit it for the default).
	MaxAttempts int `json:"max_attempts,omitempty"`

	// validated is a private copy of the spec as it passed validation; only
	// seal sets it.
	validated *Spec
}

// AttemptTimeout is how long one attempt may take: Timeout, or
// DefaultAttemptTimeout if Timeout is zero. It never exceeds
// MaxAttemptTimeout, and an invalid negative Timeout reads as the default.
func (s Spec) AttemptTimeout() time.Duration {
	switch {
	case s.Timeout <= 0:
		return DefaultAttemptTimeout
	case s.Timeout > MaxAttemptTimeout:
		return MaxAttemptTimeout
	}
	return s.Timeout
}

// VendorWindow is how long the vendor deduplicates on the key: the binding's
// Window, or DefaultVendorWindow if it is zero, for a header, body_pointer,
// meta or in_process_keyed binding; zero for an unsupported or in_process
// one (the vendor deduplicates nothing).
func (s Spec) VendorWindow() time.Duration {
	switch s.Idempotency.Kind {
	case BindingHeader, BindingBodyPointer, BindingInProcessKeyed, BindingMeta:
	default:
		return 0
	}
	switch w := s.Idempotency.Window; {
	case w <= 0:
		return DefaultVendorWindow
	case w > maxVendorWindow:
		return maxVendorWindow
	}
	return s.Idempotency.Window
}
