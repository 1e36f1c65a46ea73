package admin

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/obol-gateway/obol/internal/printable"
	"github.com/obol-gateway/obol/receipt"
)

// The wire shapes of the API, each defined once: the [Handler] encodes
// them and the [Client] decodes them (docs/DESIGN.md, "refserver wire
// contract").

// Error is the body of every refused request, and the error a [Client]
// returns for one. RetryAfterMS is set on a settle refused in_progress
// only.
type Error struct {
	Reason       string `json:"reason"`
	Status       int    `json:"status"`
	Message      string `json:"message"`
	RetryAfterMS int64  `json:"retry_after_ms,omitempty"`
	// SafeNewKey is the reason's safe_new_key (docs/DESIGN.md, "refserver
	// wire contract"), for a refusal that came from the store: nil
	// (absent) for the admin API's own reasons, which read no record.
	SafeNewKey *bool `json:"safe_new_key,omitempty"`
	// Body is the answer as the gateway wrote it (client side only).
	Body []byte `json:"-"`
}

// Error is the refusal as a terminal may print it: its reason, status and
// message without control or format characters. An answer that is not
// the API's (a proxy's page) has no reason.
func (e *Error) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("HTTP %d: %s", e.Status, printable.Cut(e.Message, 1000))
	}
	return fmt.Sprintf("%s (HTTP %d): %s", printable.Cut(e.Reason, 64), e.Status, printable.Cut(e.Message, 1000))
}

// Ticket is the answer of POST /v1/approvals/{ticket}/approve and /deny.
type Ticket struct {
	Ticket         string `json:"ticket"`
	Status         string `json:"status"`
	Workspace      string `json:"workspace"`
	Tool           string `json:"tool"`
	IdempotencyKey string `json:"idempotency_key"`
}

// Pending is one call awaiting an approver's decision. State is held, or
// the state of a re-held record (unknown most often).
type Pending struct {
	Ticket         string `json:"ticket"`
	Workspace      string `json:"workspace"`
	Tool           string `json:"tool"`
	IdempotencyKey string `json:"idempotency_key"`
	State          string `json:"state"`
	HeldAt         string `json:"held_at"`
}

// PendingPage is the answer of GET /v1/approvals; Cursor is "" at the end.
type PendingPage struct {
	Pending []Pending `json:"pending"`
	Cursor  string    `json:"cursor"`
}

// UnknownPage is the answer of GET /v1/unknown: the receipts of the calls
// that are unknown now; Cursor is "" at the end.
type UnknownPage struct {
	Unknown []ListedReceipt `json:"unknown"`
	Cursor  string          `json:"cursor"`
}

// ListedReceipt is a listed call's receipt, FirstAttemptAt (when its
// slot's first attempt that may have left was reserved: the tool's vendor
// window runs from it, and past it the slot is no longer dispatched
// again), and, while its attempt may still be running at its gateway,
// SettleAfter: when a settle stops answering in_progress (zero otherwise).
type ListedReceipt struct {
	receipt.Receipt
	FirstAttemptAt time.Time
	SettleAfter    time.Time
}

// MarshalJSON is the receipt's JSON with first_attempt_at and then
// settle_after last, when set.
func (l ListedReceipt) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(l.Receipt)
	if err != nil || len(b) < 2 {
		return b, err
	}
	b = b[: len(b)-1 : len(b)-1]
	for _, f := range []struct {
		name string
		at   time.Time
	}{{"first_attempt_at", l.FirstAttemptAt}, {"settle_after", l.SettleAfter}} {
		if !f.at.IsZero() {
			at, _ := json.Marshal(f.at.UTC().Format(timeLayout))
			b = append(append(b, `,"`+f.name+`":`...), at...)
		}
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (l *ListedReceipt) UnmarshalJSON(b []byte) error {
	var at struct {
		FirstAttemptAt time.Time `json:"first_attempt_at"`
		SettleAfter    time.Time `json:"settle_after"`
	}
	if err := json.Unmarshal(b, &l.Receipt); err != nil {
		return err
	}
	if err := json.Unmarshal(b, &at); err != nil {
		return err
	}
	l.FirstAttemptAt, l.SettleAfter = at.FirstAttemptAt, at.SettleAfter
	return nil
}

const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// Resolve is the body of POST /v1/receipts/{key}/resolve. AttemptCount is
// required: the attempt_count of the receipt as listed, the operand of the
// settle's compare-and-set (docs/DESIGN.md, "The record and its
// lifecycle"), so a redispatch since the listing refuses the settle.
type Resolve struct {
	Outcome      string `json:"outcome"`
	Note         string `json:"note"`
	AttemptCount *int   `json:"attempt_count"`
}

// pinRequest is the body of POST /v1/capabilities/{name}/pin.
type pinRequest struct {
	Provider string `json:"provider"`
}

// Pin is the answer of a pin.
type Pin struct {
	Capability string `json:"capability"`
	Pin        string `json:"pin"`
	Previous   string `json:"previous"`
}

// AdvanceRequest is the body of POST /v1/scope-version/advance; both
// fields are optional (To: this gateway's version + 1; Strand: none).
type AdvanceRequest struct {
	To     *int `json:"to,omitempty"`
	Strand *int `json:"strand,omitempty"`
}

// Count is the number of live records of one scope version and state.
type Count struct {
	Version int    `json:"version"`
	State   string `json:"state"`
	Records int    `json:"records"`
}

// Advance is the answer of an advance; a refusal (409 records_live,
// conflict, migrating) carries the [Error] fields as well.
type Advance struct {
	Reason       string  `json:"reason,omitempty"`
	Status       int     `json:"status,omitempty"`
	Message      string  `json:"message,omitempty"`
	Phase        string  `json:"phase"`
	From         int     `json:"from"`
	To           int     `json:"to"`
	Live         int     `json:"live"`
	Counts       []Count `json:"counts"`
	RetryAfterMS int64   `json:"retry_after_ms,omitempty"`
}

// Acknowledgement is the answer of POST /v1/store/acknowledge-data-loss.
// Acknowledged is false when no loss was recorded (nothing changed); Lost
// says what was seen (which sentinel vanished).
type Acknowledgement struct {
	Acknowledged bool   `json:"acknowledged"`
	Lost         string `json:"lost,omitempty"`
	Sentinels    int    `json:"sentinels"`
	Message      string `json:"message"`
}
