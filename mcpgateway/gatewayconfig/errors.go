package gatewayconfig

import (
	"errors"
	"strings"
)

// ErrInvalidConfig is wrapped by every error of [Load] and [LoadFile]: a
// configuration file that cannot be served. The error lists every problem,
// one per line, each naming its field path and never a value; a file that
// cannot be read wraps the read error too.
var ErrInvalidConfig = errors.New("gatewayconfig: invalid config")

// configError is every problem of a configuration, one per line, each
// naming its field path and never a value. It unwraps to
// [ErrInvalidConfig] and, if that was the problem, the read error of
// [LoadFile].
type configError struct {
	problems []string
	err      error
}

func (e *configError) Error() string { return "gatewayconfig: " + strings.Join(e.problems, "\n  ") }

// Unwrap returns ErrInvalidConfig and the read error, if any.
func (e *configError) Unwrap() []error {
	if e.err != nil {
		return []error{ErrInvalidConfig, e.err}
	}
	return []error{ErrInvalidConfig}
}
