package broker

import "errors"

// Sentinels. Adapters return them wrapped in an [*effectspec.FieldError]
// (configuration, routing, a spec a broker cannot dispatch) or as the Err of
// a before_send Result (a call refused before any byte was written). A
// field error's Subject is the adapter ("nango", "composio") or the spec's
// tool; its message never holds the field's value when that value may be a
// secret, nor a base URL, which could carry credentials in its path.
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
