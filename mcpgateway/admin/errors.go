package admin

import "errors"

var (
	// ErrInvalidConfig is a [Config] that [New] cannot serve.
	ErrInvalidConfig = errors.New("admin: invalid config")
	// ErrNotAnswer is an answer that is not the API's (a proxy's page, a
	// body that does not decode); the [Client]'s error wraps it.
	ErrNotAnswer = errors.New("admin: not an answer of the gateway's admin API")
)
