package receipt

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/internal/jsonwire"
)

// RouteRecord is the route as a receipt shows it, the "route" object of
// docs/DESIGN.md, "Receipt (JSON)": the non-secret facts of the destination
// and the fingerprint of all of them, as the claim pinned them. The facts
// themselves, binding and credential name included, are the idempotency
// package's Route, whose Record method makes this one.
type RouteRecord struct {
	Connection string `json:"connection"`
	Provider   string `json:"provider"`
	Tool       string `json:"tool,omitempty"` // the provider's tool (for a cap.* call, the pinned one)
	Method     string `json:"method,omitempty"`
	Host       string `json:"host,omitempty"`
	Path       string `json:"path,omitempty"`
	// UpstreamTool is the upstream MCP server's tool, for an MCP route.
	UpstreamTool string `json:"upstream_tool,omitempty"`
	Fingerprint  string `json:"fingerprint"`
}

// Receipt records what the gateway did for one idempotency key. Its JSON form
// is stable (field order and names are part of the wire contract) and it
// holds no free-form text but an operator's resolution note: nothing a vendor
// or client sends is copied into it except the status code, so no secret can
// reach it.
type Receipt struct {
	IdempotencyKey string      `json:"idempotency_key"`
	KeySource      string      `json:"key_source"` // "supplied" or "minted"
	RequestHash    string      `json:"request_hash"`
	Tool           string      `json:"tool"`
	Workspace      string      `json:"workspace"`
	Route          RouteRecord `json:"route"`
	Binding        string      `json:"binding"`     // header, body_pointer, unsupported, in_process, in_process_keyed or meta
	Propagation    string      `json:"propagation"` // header, body_pointer, handler, meta or none
	// VendorKey is the key the vendor received (docs/DESIGN.md, "The key on the
	// vendor hop"), for header, body_pointer, meta and in_process_keyed bindings
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

// MarshalJSON encodes times in UTC with millisecond precision. It appends
// the bytes by hand, without reflection, since every call encodes a
// receipt; the tests hold them equal, byte for byte, to encoding/json's
// encoding of the same fields.
func (r Receipt) MarshalJSON() ([]byte, error) {
	return r.appendJSON(make([]byte, 0, r.sizeHint()))
}

// sizeHint bounds the encoding when no string needs an escape, so that
// MarshalJSON allocates once.
func (r *Receipt) sizeHint() int {
	// 370 covers the keys, punctuation and quotes of the strings; 2×20 the
	// ints; 2×26 the quoted times.
	n := 370 + 2*20 + 2*26 + len(r.IdempotencyKey) + len(r.KeySource) + len(r.RequestHash) + len(r.Tool) +
		len(r.Workspace) + len(r.Route.Connection) + len(r.Route.Provider) + len(r.Route.Tool) +
		len(r.Route.Method) + len(r.Route.Host) + len(r.Route.Path) + len(r.Route.UpstreamTool) + len(r.Route.Fingerprint) +
		len(r.Binding) + len(r.Propagation) + len(r.VendorKey) + len(r.Outcome)
	if res := r.Resolution; res != nil { // its encoding: 64 bytes and its strings
		n += 64 + len(res.Outcome) + len(res.By) + len(res.Note)
	}
	return n
}

// appendJSON appends the receipt's JSON to b: the fields in the order of
// Receipt, with omitempty's rules for vendor_key, route's tool, method, host,
// path and upstream_tool, status, safe_new_key, finalized_at and resolution.
func (r *Receipt) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"idempotency_key":`...)
	b = jsonwire.AppendString(b, r.IdempotencyKey)
	b = append(b, `,"key_source":`...)
	b = jsonwire.AppendString(b, r.KeySource)
	b = append(b, `,"request_hash":`...)
	b = jsonwire.AppendString(b, r.RequestHash)
	b = append(b, `,"tool":`...)
	b = jsonwire.AppendString(b, r.Tool)
	b = append(b, `,"workspace":`...)
	b = jsonwire.AppendString(b, r.Workspace)
	b = append(b, `,"route":{"connection":`...)
	b = jsonwire.AppendString(b, r.Route.Connection)
	b = append(b, `,"provider":`...)
	b = jsonwire.AppendString(b, r.Route.Provider)
	if r.Route.Tool != "" {
		b = append(b, `,"tool":`...)
		b = jsonwire.AppendString(b, r.Route.Tool)
	}
	if r.Route.Method != "" {
		b = append(b, `,"method":`...)
		b = jsonwire.AppendString(b, r.Route.Method)
	}
	if r.Route.Host != "" {
		b = append(b, `,"host":`...)
		b = jsonwire.AppendString(b, r.Route.Host)
	}
	if r.Route.Path != "" {
		b = append(b, `,"path":`...)
		b = jsonwire.AppendString(b, r.Route.Path)
	}
	if r.Route.UpstreamTool != "" {
		b = append(b, `,"upstream_tool":`...)
		b = jsonwire.AppendString(b, r.Route.UpstreamTool)
	}
	b = append(b, `,"fingerprint":`...)
	b = jsonwire.AppendString(b, r.Route.Fingerprint)
	b = append(b, `},"binding":`...)
	b = jsonwire.AppendString(b, r.Binding)
	b = append(b, `,"propagation":`...)
	b = jsonwire.AppendString(b, r.Propagation)
	if r.VendorKey != "" {
		b = append(b, `,"vendor_key":`...)
		b = jsonwire.AppendString(b, r.VendorKey)
	}
	b = append(b, `,"attempt_count":`...)
	b = strconv.AppendInt(b, int64(r.AttemptCount), 10)
	b = append(b, `,"outcome":`...)
	b = jsonwire.AppendString(b, string(r.Outcome))
	if r.Status != 0 {
		b = append(b, `,"status":`...)
		b = strconv.AppendInt(b, int64(r.Status), 10)
	}
	b = append(b, `,"replayed":`...)
	b = strconv.AppendBool(b, r.Replayed)
	if r.SafeNewKey != nil {
		b = append(b, `,"safe_new_key":`...)
		b = strconv.AppendBool(b, *r.SafeNewKey)
	}
	b = append(b, `,"created_at":`...)
	b = appendTime(b, r.CreatedAt)
	if !r.FinalizedAt.IsZero() {
		b = append(b, `,"finalized_at":`...)
		b = appendTime(b, r.FinalizedAt)
	}
	if r.Resolution != nil {
		res, err := r.Resolution.MarshalJSON() // compact already, as encoding/json would leave it
		if err != nil {
			return nil, err
		}
		b = append(b, `,"resolution":`...)
		b = append(b, res...)
	}
	return append(b, '}'), nil
}

// appendTime appends formatTime(t) as a JSON string; the UTC layout yields
// only digits, '-', ':', '.', 'T' and 'Z', none of which JSON escapes. The
// digits are written here for four-digit years, as AppendFormat took a third
// of the encoder's time.
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	if t.IsZero() {
		return append(b, '"')
	}
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		b = t.AppendFormat(b, timeLayout)
		return append(b, '"')
	}
	hour, minute, sec := t.Clock()
	ms := t.Nanosecond() / 1e6
	return append(b,
		byte('0'+year/1000), byte('0'+year/100%10), byte('0'+year/10%10), byte('0'+year%10), '-',
		byte('0'+month/10), byte('0'+month%10), '-', byte('0'+day/10), byte('0'+day%10), 'T',
		byte('0'+hour/10), byte('0'+hour%10), ':', byte('0'+minute/10), byte('0'+minute%10), ':',
		byte('0'+sec/10), byte('0'+sec%10), '.', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10), 'Z', '"')
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeLayout)
}
