package effectspec

import "time"

// Effect says whether a call changes the world. The zero Effect reads as
// EffectWrite: the cautious reading.
type Effect string

const (
	EffectWrite Effect = "write"
	EffectRead  Effect = "read"
)

// RouteKind says whether the gateway calls the vendor itself (native) or
// through a catalog broker (federated). The zero RouteKind reads as native.
type RouteKind string

const (
	RouteNative    RouteKind = "native"
	RouteFederated RouteKind = "federated"
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
)

// Propagation is what the gateway actually did with the key on the wire:
// "header", "body_pointer" or "none".
type Propagation string

const (
	PropagationHeader      Propagation = "header"
	PropagationBodyPointer Propagation = "body_pointer"
	PropagationNone        Propagation = "none"
)

// Outcome is the final classification of a vendor response.
type Outcome string

const (
	Accepted           Outcome = "accepted"
	DefinitelyRejected Outcome = "definitely_rejected"
	Unknown            Outcome = "unknown"
)

// Binding is the tool's idempotency binding: how our key reaches the vendor.
type Binding struct {
	Kind    BindingKind `json:"binding"`
	Header  string      `json:"header,omitempty"`
	Pointer string      `json:"pointer,omitempty"`
}

// Statuses lists the vendor statuses of each class. A status in no list is
// Unknown; the zero Statuses accepts nothing.
type Statuses struct {
	Accepted           []int `json:"accepted,omitempty"`
	DefinitelyRejected []int `json:"definitely_rejected,omitempty"`
	Retryable          []int `json:"retryable,omitempty"`
	// InUse holds the statuses the vendor answers while a request with the
	// same key is still being processed (Stripe answers 409). They are
	// always Unknown and never retryable: the first request may yet succeed.
	// A code in InUse is in no other list.
	InUse []int `json:"in_use,omitempty"`
}

const (
	// DefaultAttemptTimeout is how long one attempt may take when a spec
	// sets no Timeout.
	DefaultAttemptTimeout = 30 * time.Second
	// MaxAttemptTimeout is the largest Timeout a spec may set.
	MaxAttemptTimeout = 15 * time.Minute
)

// Spec is one tool's EffectSpec. A Spec to dispatch with must come from
// Parse, ParseList or New, which validate it; retry.Orchestrator refuses any
// other with ErrUnvalidated (see Validated). The zero Spec reads most
// cautiously (a native write with no vendor binding and nothing accepted),
// but it is not validated.
type Spec struct {
	Tool        string    `json:"tool"`
	Effect      Effect    `json:"effect"`
	Route       RouteKind `json:"route"`
	Idempotency Binding   `json:"idempotency"`
	Status      Statuses  `json:"status"`
	Approval    Approval  `json:"approval"`
	// Timeout is how long one attempt may take, at most MaxAttemptTimeout.
	// If zero, DefaultAttemptTimeout; see AttemptTimeout. In JSON it is a Go
	// duration string such as "30s" or "2m", which Parse reads (encoding/json
	// refuses it rather than lose it).
	Timeout time.Duration `json:"timeout,omitempty"`

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
