package mcpgateway

import (
	"errors"
	"fmt"

	"github.com/obol-gateway/obol/idempotency"
)

// Refusals of a name that is a near miss of a name the gateway reads
// (nearMiss, docs/DESIGN.md, "The key" and "refserver wire contract"). Each wraps
// idempotency.ErrMalformedKey, so the answer is malformed_key with no key in
// it, and each text is fixed: it never quotes the name, which is the
// caller's input and may hold anything (a pasted secret, control or bidi
// characters); the caller knows what it sent, and the text says what to send
// instead.
var (
	errNearMissMeta = fmt.Errorf("%w: a member of params is spelled like _meta but is not _meta; "+
		"the key and the approval ticket are read from params._meta only", idempotency.ErrMalformedKey)
	errNearMissMetaName = fmt.Errorf("%w: a params._meta member is spelled like a name of the gateway "+
		"but is not one: the gateway reads exactly %s and %s (case included) and would ignore it",
		idempotency.ErrMalformedKey, metaKey, metaTicket)
	errNearMissHeader = fmt.Errorf("%w: a request header field is named like %s but is not %s; "+
		"send the key in the one %s header field or in params._meta %s",
		idempotency.ErrMalformedKey, headerKey, headerKey, headerKey, metaKey)
	errKeyInTrailer = fmt.Errorf("%w: a trailer field is named like %s; the key is read from the header section only",
		idempotency.ErrMalformedKey, headerKey)
)

// ErrInvalidConfig is wrapped by every error of [New]: a [Config] it cannot serve.
var ErrInvalidConfig = errors.New("mcpgateway: invalid config")

// ErrInputSchema is wrapped by every error of [ParseInputSchema].
var ErrInputSchema = errors.New("mcpgateway: input schema")

// ErrRejected marks a handler's definite rejection ([Reject]): the call is
// definitely_rejected.
var ErrRejected = errors.New("mcpgateway: rejected")

// ErrNothingDone marks a handler's report that it did nothing yet ([NothingDone]).
var ErrNothingDone = errors.New("mcpgateway: handler did nothing")
