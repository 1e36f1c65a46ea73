package retry

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/obol-gateway/obol/idempotency"
)

// A request that cannot be sent as given (nil, no URL, no host, a scheme
// other than http or https, CONNECT, a Content-Length without a body, or an
// invalid header) wraps [idempotency.ErrInvalidRequest]. It is reported as
// before_send, but repeating the attempt cannot help.
//
// A before_send round trip that no connection was handed to, and that
// neither its context nor the send deadline stopped (a refused or timed-out
// dial, a failed host lookup or TLS handshake), wraps
// [idempotency.ErrVendorUnreachable]: the vendor was not reached.

var (
	// ErrSendDeadline: the attempt had not written a byte when its send
	// deadline ([WithSendDeadline]) passed, so it was stopped unsent. It is
	// always before_send.
	ErrSendDeadline = errors.New("retry: send deadline passed before the request was written")

	// errSealed is what a sealed connection returns from Write.
	errSealed = errors.New("retry: connection sealed")
	// errSecondConn cancels an attempt whose transport asked for a second
	// connection: the attempt would become a hidden retry.
	errSecondConn = errors.New("retry: transport asked for a second connection")
)

// Error is the error of an attempt that got no complete response: the Err of
// a before_send or post_send Result.
//
// Its message is built from a fixed vocabulary: it never holds a header
// value, the URL (whose path, query or userinfo may carry credentials), or
// bytes the vendor sent. The underlying error is kept for errors.Is and
// errors.As, but its own message may hold any of those, so do not log it.
type Error struct {
	Phase Phase
	// Op is the step that failed: "request", "round trip" or "read body".
	Op string
	// Reason is a short, fixed-vocabulary description of the cause, such as
	// "connection refused" or "context deadline exceeded".
	Reason string
	// Err is the underlying error. Its message is not safe to log.
	Err error
}

func (e *Error) Error() string {
	return "retry: " + string(e.Phase) + ": " + e.Op + ": " + e.Reason
}

func (e *Error) Unwrap() error { return e.Err }

func newError(phase Phase, op string, err error) *Error {
	return &Error{Phase: phase, Op: op, Reason: reason(err), Err: err}
}

// reason names the cause of err without quoting it.
func reason(err error) string {
	var (
		errno   syscall.Errno
		dnsErr  *net.DNSError
		certErr *tls.CertificateVerificationError
		alert   tls.AlertError
		recErr  tls.RecordHeaderError
	)
	switch {
	case errors.Is(err, idempotency.ErrInvalidRequest):
		return "invalid request"
	case errors.Is(err, errSecondConn):
		return "transport asked for a second connection"
	case errors.Is(err, errSealed):
		return "connection sealed"
	case errors.Is(err, context.Canceled):
		return "context canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "context deadline exceeded"
	case errors.As(err, &dnsErr):
		return "host lookup failed"
	case errors.As(err, &certErr):
		return "tls certificate verification failed"
	case errors.As(err, &alert), errors.As(err, &recErr):
		return "tls handshake failed"
	case errors.As(err, &errno):
		switch errno {
		case syscall.ECONNREFUSED:
			return "connection refused"
		case syscall.ECONNRESET:
			return "connection reset"
		case syscall.EPIPE:
			return "broken pipe"
		case syscall.ENETUNREACH, syscall.EHOSTUNREACH:
			return "unreachable"
		}
		return "network error"
	case isTimeout(err):
		return "timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return "connection closed"
	}
	// net/http keeps these unexported; their text is fixed and quotes nothing.
	switch msg := err.Error(); {
	case msg == "http: server closed idle connection":
		return "connection closed"
	case strings.HasPrefix(msg, "net/http: invalid header"), strings.HasPrefix(msg, "net/http: invalid trailer"):
		return "invalid header"
	case strings.Contains(msg, "malformed HTTP"):
		return "malformed response"
	case strings.Contains(msg, "server response headers exceeded"):
		return "response headers too large"
	}
	if errors.Is(err, idempotency.ErrVendorUnreachable) {
		return "connect failed"
	}
	return "transport error"
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
