package effectspec

import (
	"encoding/json"
	"time"
)

// MarshalJSON writes the spec in the shape Parse reads, leaving out empty
// enumerated fields (their zero defaults), because Parse refuses an explicit
// "". Parse(json.Marshal(s)) gives s back for every valid s.
func (s Spec) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Tool        string    `json:"tool"`
		Effect      Effect    `json:"effect,omitempty"`
		Route       RouteKind `json:"route,omitempty"`
		Idempotency Binding   `json:"idempotency"`
		Status      Statuses  `json:"status"`
		Approval    Approval  `json:"approval,omitempty"`
		Timeout     string    `json:"timeout,omitempty"`
		MaxAttempts int       `json:"max_attempts,omitempty"`
	}{s.Tool, s.Effect, s.Route, s.Idempotency, s.Status, s.Approval, durationText(s.Timeout), s.MaxAttempts})
}

// durationText is d as Parse reads it, "" for the zero default.
func durationText(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

// MarshalJSON writes the binding as Parse reads it, without an empty kind.
func (b Binding) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Kind    BindingKind `json:"binding,omitempty"`
		Header  string      `json:"header,omitempty"`
		Pointer string      `json:"pointer,omitempty"`
		Meta    string      `json:"meta,omitempty"`
		Window  string      `json:"window,omitempty"`
	}{b.Kind, b.Header, b.Pointer, b.Meta, durationText(b.Window)})
}
