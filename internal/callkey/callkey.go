// Package callkey reads the idempotency key and the approval ticket of a
// request, one reading for both MCP fronts (mcpgateway and mcpgo):
// docs/DESIGN.md, "The key" and "refserver wire contract". Every refusal
// wraps [idempotency.ErrMalformedKey] (a ticket that is not one is the
// front's own invalid_request), and no text quotes what the caller sent.
package callkey

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/nearmiss"
	"github.com/obol-gateway/obol/internal/strictjson"
)

// The wire names the key and the ticket are read under; mcpgateway
// exports them (its MetaKey, MetaTicket and HeaderKey).
const (
	MetaKey    = "dev.obol/idempotency-key"
	MetaTicket = "dev.obol/approval-ticket"
	HeaderKey  = "Idempotency-Key"
)

// Refusals of a name that is a near miss of a name the front reads
// ([NearMiss], [NearMissHeader]). Each text is fixed: the name is the
// caller's input and may hold anything (a pasted secret, control or bidi
// characters); the caller knows what it sent, and the text says what to
// send instead.
var (
	errNearMissMeta = fmt.Errorf("%w: a member of params is spelled like _meta but is not _meta; "+
		"the key and the approval ticket are read from params._meta only", idempotency.ErrMalformedKey)
	errNearMissMetaName = fmt.Errorf("%w: a params._meta member is spelled like a name of the gateway "+
		"but is not one: the gateway reads exactly %s and %s (case included) and would ignore it",
		idempotency.ErrMalformedKey, MetaKey, MetaTicket)
	errNearMissHeader = fmt.Errorf("%w: a request header field is named like %s but is not %s; "+
		"send the key in the one %s header field or in params._meta %s",
		idempotency.ErrMalformedKey, HeaderKey, HeaderKey, HeaderKey, MetaKey)
	errKeyInTrailer = fmt.Errorf("%w: a trailer field is named like %s; the key is read from the header section only",
		idempotency.ErrMalformedKey, HeaderKey)
)

// NearMiss is the refusal of the first member of params (other than
// _meta) spelled like _meta, else of the first member of params._meta
// spelled like a name the front reads, nil when there is none.
func NearMiss(params, meta []strictjson.Member) error {
	for _, m := range params {
		if string(m.Name) != "_meta" && nearmiss.Container(m.Name) {
			return errNearMissMeta
		}
	}
	for i, m := range meta {
		if nearmiss.Name(m.Name, MetaKey, MetaTicket) {
			return fmt.Errorf("%w (member %d of params._meta)", errNearMissMetaName, i+1)
		}
	}
	return nil
}

// NearMissHeader is the refusal of a header field named like the key or
// the ticket other than exactly [HeaderKey], else of any trailer field so
// named: the key is read from the header section only, so a trailer
// Idempotency-Key, exact or not, would be ignored too (Go's server lists
// the trailer fields a request announces in its Trailer).
func NearMissHeader(header, trailer http.Header) error {
	switch {
	case nearmiss.Header(header, HeaderKey):
		return errNearMissHeader
	case nearmiss.Header(trailer, ""):
		return errKeyInTrailer
	}
	return nil
}

// Key decides the idempotency key of a request from its Idempotency-Key
// header fields and the value of params._meta[MetaKey] (nil when absent),
// for clients that cannot set headers. Either follows the rules of the
// header (bare or Structured Field string form); the _meta value must be a
// JSON string. Both may be sent when they are the same key once parsed:
// two different keys would leave it open which one a retry means. Neither
// mints a key.
func Key(header []string, meta json.RawMessage) (idempotency.Key, idempotency.KeySource, error) {
	if meta == nil {
		return idempotency.FromHeader(header)
	}
	s, ok := String(meta)
	if !ok {
		return idempotency.Key{}, "", fmt.Errorf("%w: _meta %s must be a JSON string", idempotency.ErrMalformedKey, MetaKey)
	}
	mk, err := idempotency.ParseKey(s)
	if err != nil {
		return idempotency.Key{}, "", fmt.Errorf("_meta %s: %w", MetaKey, err)
	}
	if len(header) == 0 {
		return mk, idempotency.KeySupplied, nil
	}
	hk, _, err := idempotency.FromHeader(header)
	if err != nil {
		return idempotency.Key{}, "", err
	}
	if hk != mk {
		return idempotency.Key{}, "", fmt.Errorf("%w: the Idempotency-Key header and _meta %s are different keys", idempotency.ErrMalformedKey, MetaKey)
	}
	return mk, idempotency.KeySupplied, nil
}

// Ticket reads the value of params._meta[MetaTicket]: ok is false when it
// is not an apt_ ticket id.
func Ticket(raw json.RawMessage) (string, bool) {
	t, ok := String(raw)
	return t, ok && idempotency.ValidTicketID(t)
}

// Resume is the key of a call that sent ticket: a call with a key keeps
// it (the core refuses one that is not the ticket's), and a call whose key
// was minted (it sent only the ticket) runs under the ticket's key and its
// source, when the ticket is workspace's. A ticket that is not found or is
// another workspace's leaves the minted key: the core refuses the call. An
// error wraps [idempotency.ErrStoreUnavailable]: the call's key could not
// be read.
func Resume(ctx context.Context, store interface {
	Ticket(ctx context.Context, id string) (idempotency.Ticket, error)
}, ticket, workspace string, key idempotency.Key, src idempotency.KeySource) (idempotency.Key, idempotency.KeySource, error) {
	if ticket == "" || src != idempotency.KeyMinted {
		return key, src, nil
	}
	t, err := store.Ticket(ctx, ticket)
	switch {
	case err == nil && t.Scope.Workspace == workspace:
		if t.KeySource != "" {
			// Not minted here: the held call's source, which its receipt
			// shows.
			src = t.KeySource
		}
		return t.Key, src, nil
	case errors.Is(err, idempotency.ErrStoreUnavailable):
		return idempotency.Key{}, "", err
	}
	return key, src, nil
}

// String reads raw, a value from a document that passed [strictjson.Check],
// if it is a JSON string (the fronts read the envelope's strings with it). Without escapes its bytes are the string (Check
// refused invalid UTF-8 and control characters), as encoding/json would
// read them.
func String(raw json.RawMessage) (string, bool) {
	s, ok := strictjson.Unquote(raw)
	return string(s), ok
}
