package broker

import (
	"errors"
	"strconv"
	"strings"
)

// Sentinels. Adapters return them wrapped in a *FieldError (configuration
// and routing) or as the Err of a before_send Result (a call refused before
// any byte was written).
var (
	// ErrRetriesEnabled: a configuration asks the broker to retry on its own
	// (Nango Retries, Retry-On or X-Max-Retries). The gateway owns every
	// retry; a broker retry would be an attempt nobody reserved or counted.
	ErrRetriesEnabled = errors.New("broker: broker retries enabled")
	// ErrAsync: a configuration asks for asynchronous execution. The answer
	// to an asynchronous trigger says nothing about the effect, and the
	// broker would own the retries.
	ErrAsync = errors.New("broker: asynchronous execution")
	// ErrInvalidConfig: a configuration field is missing or malformed.
	ErrInvalidConfig = errors.New("broker: invalid config")
	// ErrInvalidRouting: routing fields are missing, unknown or malformed.
	ErrInvalidRouting = errors.New("broker: invalid routing")
	// ErrInvalidArguments: the call's arguments cannot be sent as the broker
	// expects them (not one JSON value, or not an object where the broker
	// needs one).
	ErrInvalidArguments = errors.New("broker: invalid arguments")
	// ErrUndecidableReply: the broker answered with a success status but its
	// reply does not say whether the tool ran (not the documented shape, or
	// cut short). The attempt is reported post_send: its outcome is unknown.
	ErrUndecidableReply = errors.New("broker: reply does not say whether the tool ran")
	// ErrNotFederated: a spec dispatched through a broker does not declare
	// route "federated".
	ErrNotFederated = errors.New("broker: spec route is not federated")
	// ErrVendorBinding: a federated spec declares a vendor binding. A broker
	// never propagates the key, so the vendor cannot deduplicate on it and
	// the binding must be "unsupported" (propagation "none").
	ErrVendorBinding = errors.New("broker: federated spec declares a vendor binding")
)

// FieldError is one problem with one configuration or routing field of one
// broker. Its message names the broker and the field and never holds the
// field's value when that value may be a secret, nor a base URL, which could
// carry credentials in its path. It unwraps to one of the sentinels above.
// An adapter reports every configuration problem at once, as an
// errors.Join of *FieldError.
type FieldError struct {
	// Broker is the adapter: "nango" or "composio".
	Broker string
	// Field is the Config field ("Retries", "BaseURL") or the routing field
	// ("routing.connection_id").
	Field string
	// Msg says what is wrong.
	Msg string
	// Err is the sentinel: ErrRetriesEnabled, ErrAsync, ErrInvalidConfig or
	// ErrInvalidRouting. A secret shorter than receipt.MinSecretLen matches
	// both ErrInvalidConfig and receipt.ErrShortSecret.
	Err error
}

// Error renders "broker: BROKER: FIELD: MSG".
func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString("broker: ")
	if e.Broker != "" {
		b.WriteString(e.Broker)
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns the sentinel.
func (e *FieldError) Unwrap() error { return e.Err }

// SpecError is a tool's EffectSpec that a broker cannot dispatch. It unwraps
// to ErrNotFederated or ErrVendorBinding.
type SpecError struct {
	// Tool is the spec's tool name as declared.
	Tool string
	// Err is the sentinel.
	Err error
}

// Error renders "broker: tool "NAME": PROBLEM".
func (e *SpecError) Error() string {
	tool := e.Tool
	if len(tool) > 64 {
		tool = tool[:64] + "..."
	}
	msg := "broker: tool " + strconv.Quote(tool) + ": " + strings.TrimPrefix(e.Err.Error(), "broker: ")
	switch e.Err {
	case ErrNotFederated:
		msg += ` (route must be "federated")`
	case ErrVendorBinding:
		msg += ` (a broker never propagates the key; binding must be "unsupported")`
	}
	return msg
}

// Unwrap returns the sentinel.
func (e *SpecError) Unwrap() error { return e.Err }
