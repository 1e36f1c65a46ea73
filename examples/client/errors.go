package main

import "errors"

var (
	// ErrReplyLost reports a call whose answer the client dropped on purpose
	// after the gateway had sent all of it: the call reached the gateway, and
	// the client knows nothing of its outcome.
	ErrReplyLost = errors.New("client: reply lost after the gateway answered")

	// ErrKeyMismatch reports an answer whose Idempotency-Key response header,
	// _meta key and receipt name different keys: a retry could not know
	// which one to send.
	ErrKeyMismatch = errors.New("client: the answer names different idempotency keys")

	// ErrUnexpected reports a step of a pattern that did not go as the
	// gateway's contract says (docs/DESIGN.md, "refserver wire contract").
	ErrUnexpected = errors.New("client: unexpected answer")

	// ErrInvalidArgs reports a -args or -minted-args that is not one JSON
	// object. It never quotes the value: arguments may hold personal data.
	ErrInvalidArgs = errors.New("client: -args and -minted-args must be one JSON object")
)
