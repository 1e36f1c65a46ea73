package canonical

import "errors"

// ErrInvalidJSON: input that is not exactly one JSON value that the canonical
// form accepts. It is [idempotency.ErrInvalidJSON], where callers meet it, so
// its text names that package.
var ErrInvalidJSON = errors.New("idempotency: invalid JSON")
