package mcpgateway

import "errors"

// ErrInvalidConfig is wrapped by every error of [New]: a [Config] it cannot serve.
var ErrInvalidConfig = errors.New("mcpgateway: invalid config")

// ErrInputSchema is wrapped by every error of [ParseInputSchema].
var ErrInputSchema = errors.New("mcpgateway: input schema")

// ErrRejected marks a handler's definite rejection ([Reject]): the call is
// definitely_rejected.
var ErrRejected = errors.New("mcpgateway: rejected")

// ErrNothingDone marks a handler's report that it did nothing yet ([NothingDone]).
var ErrNothingDone = errors.New("mcpgateway: handler did nothing")
