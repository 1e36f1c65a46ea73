package retry

import (
	"bytes"
	"context"
	"fmt"
	"net/http"

	"github.com/obol-gateway/obol/idempotency"
)

// HTTPTarget sends a native tool call: its arguments as the JSON body of one
// HTTP request, with the effective key propagated as the Spec declares.
type HTTPTarget struct {
	// Executor makes the attempt. If nil, the Executor shared by every
	// HTTPTarget whose Executor is nil.
	Executor *Executor
	// Method is the HTTP method. If empty, POST.
	Method string
	// URL is the vendor endpoint.
	URL string
	// Header is sent with every attempt, for example the connection's
	// Authorization. It may hold secrets: nothing of it reaches a receipt,
	// a stored result or an error, and the credentials Secrets finds in it
	// are scrubbed from the vendor's answer.
	Header http.Header
	// InjectHeaders, if non-nil, adds headers from the attempt's ctx, such
	// as the W3C traceparent of its span (otelretry.Inject, which writes no
	// tracestate: what a client put there is not the vendor's to read).
	// Header, the Content-Type and the key win over what it sets. If nil,
	// none.
	InjectHeaders func(ctx context.Context, h http.Header)
}

var sharedExecutor Executor

// Send propagates the key and makes exactly one attempt. A request that
// cannot be built (the key cannot be written at the pointer, a URL that does
// not parse) is [BeforeSend] with [idempotency.ErrInvalidRequest]: it fails the same way
// every time, so it is never retried, and nothing was written.
func (t *HTTPTarget) Send(ctx context.Context, a Attempt) Result {
	body := idempotency.ArgumentsOrEmpty(a.Arguments)
	h := http.Header{}
	if t.InjectHeaders != nil {
		t.InjectHeaders(ctx, h)
	}
	for k, v := range t.Header {
		h[k] = append([]string(nil), v...)
	}
	h.Set("Content-Type", "application/json")
	body, _, err := a.Spec.Apply(h, body, a.Key.String())
	if err != nil {
		return Result{Phase: BeforeSend, Err: fmt.Errorf("%w: %w", idempotency.ErrInvalidRequest, err)}
	}
	method := t.Method
	if method == "" {
		method = http.MethodPost
	}
	req, err := http.NewRequestWithContext(ctx, method, t.URL, bytes.NewReader(body))
	if err != nil {
		return Result{Phase: BeforeSend, Err: newError(BeforeSend, "request", fmt.Errorf("%w: %w", idempotency.ErrInvalidRequest, err))}
	}
	req.Header = h
	ex := t.Executor
	if ex == nil {
		ex = &sharedExecutor
	}
	return ex.Do(ctx, req)
}
