package receipt

import (
	"encoding/json"
	"time"

	"github.com/obol-gateway/obol/effectspec"
)

// Route is the non-secret route record of a call: the facts its fingerprint
// covers, as the record was created with them (docs/DESIGN.md, "Receipt (JSON)").
type Route struct {
	Connection  string `json:"connection"`
	Provider    string `json:"provider"`
	Tool        string `json:"tool,omitempty"` // the provider's tool (for a cap.* call, the pinned one)
	Method      string `json:"method,omitempty"`
	Host        string `json:"host,omitempty"`
	Path        string `json:"path,omitempty"`
	Fingerprint string `json:"fingerprint"`
}

// Receipt records what the gateway did for one idempotency key. Its JSON form
// is stable (field order and names are part of the wire contract) and it
// holds no free-form text but an operator's resolution note: nothing a vendor
// or client sends is copied into it except the status code, so no secret can
// reach it.
type Receipt struct {
	IdempotencyKey string `json:"idempotency_key"`
	KeySource      string `json:"key_source"` // "supplied" or "minted"
	RequestHash    string `json:"request_hash"`
	Tool           string `json:"tool"`
	Workspace      string `json:"workspace"`
	Route          Route  `json:"route"`
	Binding        string `json:"binding"`     // header, body_pointer, unsupported, in_process or in_process_keyed
	Propagation    string `json:"propagation"` // header, body_pointer, handler or none
	// VendorKey is the key the vendor received (docs/DESIGN.md, "The key on the
	// vendor hop"), for header, body_pointer and in_process_keyed bindings
	// only (the last: the key its handler passed downstream); never the
	// client's key, except on a record made before vendor keys existed.
	VendorKey string `json:"vendor_key,omitempty"`
	// AttemptCount counts the attempts reserved under the key, each made
	// durable before it could be sent: never below what the vendor saw,
	// above it only by attempts proven never sent (before_send, a failed
	// WAIT, a claim's attempt given back unsent after its caller left or
	// its reply was lost) or a gateway that died between reserving and
	// sending (docs/DESIGN.md, "Receipt (JSON)"). For an in-process tool it
	// counts handler runs; a handler's own retries downstream are not seen
	// (docs/DESIGN.md, "In-process tools").
	AttemptCount int                `json:"attempt_count"`
	Outcome      effectspec.Outcome `json:"outcome"`
	// Status is the vendor's last HTTP status; 0 (omitted) when none arrived.
	Status   int  `json:"status,omitempty"`
	Replayed bool `json:"replayed"`
	// SafeNewKey tells an agent whether calling again under a new key is safe
	// (docs/DESIGN.md, "refserver wire contract"): true only when nothing under
	// this key may have had an effect (a definitely_rejected call none of whose
	// earlier attempts may have left, a denied call that sent nothing), false
	// otherwise (the call ran or may have run: retry with the same key). Nil
	// (omitted) when not known.
	SafeNewKey  *bool     `json:"safe_new_key,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	FinalizedAt time.Time `json:"finalized_at,omitzero"`
	// Resolution is set when an operator settled an unknown call; nil
	// (omitted) otherwise.
	Resolution *Resolution `json:"resolution,omitempty"`
}

// Safe returns a pointer to b, for SafeNewKey.
func Safe(b bool) *bool { return &b }

// Resolution says who settled an unknown call, when and why. Note is the
// operator's text, checked by the store (bounded, no control characters).
type Resolution struct {
	Outcome effectspec.Outcome `json:"outcome"`
	By      string             `json:"by"`
	At      time.Time          `json:"at"`
	Note    string             `json:"note"`
}

// MarshalJSON encodes At as Receipt does its times, in the field order of
// the wire contract.
func (r Resolution) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Outcome effectspec.Outcome `json:"outcome"`
		By      string             `json:"by"`
		At      string             `json:"at"`
		Note    string             `json:"note"`
	}{r.Outcome, r.By, formatTime(r.At), r.Note})
}

// timeLayout keeps millisecond precision, the precision of Redis TIME as the
// store records it, so a receipt encodes the same before and after a replay.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// MarshalJSON encodes times in UTC with millisecond precision.
func (r Receipt) MarshalJSON() ([]byte, error) {
	type plain Receipt
	type wire struct {
		plain
		CreatedAt   string      `json:"created_at"`
		FinalizedAt string      `json:"finalized_at,omitempty"`
		Resolution  *Resolution `json:"resolution,omitempty"` // last, after the times
	}
	w := wire{plain: plain(r), CreatedAt: formatTime(r.CreatedAt), FinalizedAt: formatTime(r.FinalizedAt), Resolution: r.Resolution}
	return json.Marshal(w)
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeLayout)
}
