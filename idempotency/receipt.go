package idempotency

import (
	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/receipt"
)

// Receipt returns the receipt of r, a record of scope (docs/DESIGN.md,
// "Receipt (JSON)"): what a receipts endpoint serves and what a call
// answers, replayed saying whether this answer replays a stored one. The
// propagation derives from the record's binding, not from a tool's current
// spec (a pin may have moved since the record was made).
func (r Record) Receipt(scope Scope, replayed bool) receipt.Receipt {
	rc := receipt.Receipt{
		IdempotencyKey: r.Key.String(),
		KeySource:      string(r.KeySource),
		RequestHash:    r.RequestHash,
		Tool:           scope.Tool,
		Workspace:      scope.Workspace,
		Route:          r.Route,
		Binding:        string(r.Binding),
		Propagation:    string(r.Binding.Propagation()),
		AttemptCount:   r.AttemptCount,
		Outcome:        r.State,
		Replayed:       replayed,
		SafeNewKey:     receipt.Safe(r.safeNewKey()),
		CreatedAt:      r.CreatedAt,
		FinalizedAt:    r.FinalizedAt,
	}
	if r.Binding.Propagation() != effectspec.PropagationNone {
		rc.VendorKey = r.sendKey().String()
	}
	if r.Result != nil {
		rc.Status = r.Result.Status
	}
	if res := r.Resolution; res != nil {
		c := *res
		rc.Resolution = &c
	}
	return rc
}

// sendKey is the key the record's attempts send the vendor: its VendorKey,
// or Key for a record made before vendor keys existed.
func (r Record) sendKey() Key {
	if r.VendorKey.IsZero() {
		return r.Key
	}
	return r.VendorKey
}

// safeNewKey is what a receipt of r says of a new key (docs/DESIGN.md,
// "Receipt (JSON)"): true for a definitely_rejected call none of
// whose earlier attempts may have left (one reservation, or one attempt
// that may have left: the rejected one) and for a denied call (it never
// dispatched); false for every other state: accepted ran, unknown and
// in_progress may have, a held call holds its slot.
func (r Record) safeNewKey() bool {
	switch r.State {
	case effectspec.DefinitelyRejected:
		return r.AttemptCount == 1 || r.SentAttempts == 1
	case effectspec.Denied:
		return true
	}
	return false
}
