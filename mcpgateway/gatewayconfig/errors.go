package gatewayconfig

import (
	"errors"
	"strings"
)

// ErrInvalidConfig is wrapped by every error of [Load] and [LoadFile]: a
// configuration file that cannot be served.
var ErrInvalidConfig = errors.New("gatewayconfig: invalid config")

// Error is every problem of a configuration, one per line, each naming its
// field path and never a value. It unwraps to [ErrInvalidConfig] and, if
// that was the problem, the read error of [LoadFile].
type Error struct {
	Problems []string
	err      error
}

func (e *Error) Error() string { return "gatewayconfig: " + strings.Join(e.Problems, "\n  ") }

// Unwrap returns ErrInvalidConfig and the read error, if any.
func (e *Error) Unwrap() []error {
	if e.err != nil {
		return []error{ErrInvalidConfig, e.err}
	}
	return []error{ErrInvalidConfig}
}
