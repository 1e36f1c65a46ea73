// Package brokerkit is what broker/nango and broker/composio share: the
// [Adapter] that makes a route and each attempt's request from one parse
// of the routing, [Problems] that reports every configuration and routing
// problem at once without a secret's value, and [NewRequest], the one
// request of an attempt (docs/DESIGN.md, "Brokers (federated routes)").
package brokerkit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"

	"github.com/obol-gateway/obol/broker"
	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/baseurl"
	"github.com/obol-gateway/obol/receipt"
	"github.com/obol-gateway/obol/retry"
)

// Adapter is the core every adapter shares: routing is parsed once into an
// R, from which both the Route the claim pins and each attempt's request
// are made, so a fingerprint cannot be pinned for one routing and sent to
// another. An adapter keeps the vendor's part (the three functions) and
// forwards its Route, Prepare and Dispatch methods to these.
type Adapter[R any] struct {
	// Parse validates routing fields, reporting every problem at once
	// ([Problems]); it sends nothing.
	Parse func(routing map[string]string) (R, error)
	// Resolve returns the dispatch facts of tool along r (see
	// [idempotency.NewRoute]).
	Resolve func(tool string, r R) (idempotency.Route, error)
	// Send makes the one request of an attempt along r through a
	// [retry.Executor], or refuses it ([broker.Refused]).
	Send func(ctx context.Context, r R, arguments []byte) retry.Result
	// Secrets returns the credentials Send sends, so that they are scrubbed
	// from every answer. Nil: none.
	Secrets func() []string
}

// Route parses routing and resolves it: the [broker.Broker] method.
func (a Adapter[R]) Route(tool string, routing map[string]string) (idempotency.Route, error) {
	r, err := a.Parse(routing)
	if err != nil {
		return idempotency.Route{}, err
	}
	return a.Resolve(tool, r)
}

// Prepare parses routing once and returns the Target that sends tool along
// it and the Route the claim pins: the method [broker.Prepare] uses.
func (a Adapter[R]) Prepare(tool string, routing map[string]string) (retry.Target, idempotency.Route, error) {
	r, err := a.Parse(routing)
	if err != nil {
		return nil, idempotency.Route{}, err
	}
	rt, err := a.Resolve(tool, r)
	if err != nil {
		return nil, idempotency.Route{}, err
	}
	send := func(ctx context.Context, arguments []byte) retry.Result { return a.Send(ctx, r, arguments) }
	return preparedTarget(send, a.Secrets), rt, nil
}

// Dispatch parses call's routing and sends it, or refuses it before_send:
// the [broker.Broker] method.
func (a Adapter[R]) Dispatch(ctx context.Context, call broker.Call) retry.Result {
	r, err := a.Parse(call.Routing)
	if err != nil {
		return broker.Refused(err)
	}
	return a.Send(ctx, r, call.Arguments)
}

// Problems collects the problems of one adapter's configuration or routing,
// so that all are reported at once as an errors.Join of
// [*effectspec.FieldError].
type Problems struct {
	// Broker names the adapter: the Subject of every problem.
	Broker string
	errs   []error
}

// Add records a problem with field, wrapping sentinel.
func (p *Problems) Add(field, msg string, sentinel error) {
	p.errs = append(p.errs, &effectspec.FieldError{Err: sentinel, Subject: p.Broker, Field: field, Problem: msg})
}

// Err returns every problem recorded, or nil.
func (p *Problems) Err() error { return errors.Join(p.errs...) }

// BaseURL checks the configuration field BaseURL (http or https, a host, no
// userinfo, query or fragment) and returns it without trailing slashes, or
// nil after recording why not. secretField names where a credential found
// in the URL belongs instead.
func (p *Problems) BaseURL(raw, secretField string) *url.URL {
	u, err := baseurl.Parse(raw)
	switch {
	case errors.Is(err, baseurl.ErrCredentials):
		p.Add("BaseURL", err.Error()+" (pass it in "+secretField+")", broker.ErrInvalidConfig)
	case err != nil:
		p.Add("BaseURL", err.Error(), broker.ErrInvalidConfig)
	}
	return u
}

// Secret checks the configuration field that holds the broker's credential:
// present, printable ASCII without spaces (it goes into a header), and at
// least [receipt.MinSecretLen] bytes, so that it can be scrubbed from
// answers. A short one matches both [broker.ErrInvalidConfig] and
// [receipt.ErrShortSecret]. No message holds the value.
func (p *Problems) Secret(field, v string) {
	switch {
	case v == "":
		p.Add(field, "required (read it from the environment)", broker.ErrInvalidConfig)
	case !visibleASCII(v):
		p.Add(field, "must be printable ASCII without spaces", broker.ErrInvalidConfig)
	case receipt.CheckSecret(v) != nil:
		p.Add(field, fmt.Sprintf("must be at least %d bytes: a shorter one cannot be scrubbed from answers", receipt.MinSecretLen),
			fmt.Errorf("%w: %w", broker.ErrInvalidConfig, receipt.ErrShortSecret))
	}
}

// Fields records every routing field that is not one of known.
func (p *Problems) Fields(routing map[string]string, known ...string) {
	for _, k := range slices.Sorted(maps.Keys(routing)) {
		if !slices.Contains(known, k) {
			if len(k) > 64 {
				k = k[:64] + "..."
			}
			p.Routing(fmt.Sprintf("%q", k), "unknown field")
		}
	}
}

// Routing records a problem with the routing field field (named
// "routing.FIELD", sentinel [broker.ErrInvalidRouting]).
func (p *Problems) Routing(field, msg string) {
	p.Add("routing."+field, msg, broker.ErrInvalidRouting)
}

// ID checks a routing id that goes into a header or a JSON body as it is
// (a connection or account id): 1 to 256 printable ASCII characters
// without spaces.
func (p *Problems) ID(field, v string) {
	switch {
	case v == "":
		p.Routing(field, "required")
	case len(v) > 256 || !visibleASCII(v):
		p.Routing(field, "must be 1 to 256 printable ASCII characters without spaces")
	}
}

// NewRequest builds the one request of an attempt: body (JSON, sent as
// Content-Type application/json) or none when nil, and no GetBody, since
// nothing may ever rewind and re-send it. Its error names routingField and
// not the URL, whose path may be sensitive.
func NewRequest(ctx context.Context, kind, routingField, method, u string, body []byte) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, &effectspec.FieldError{Err: broker.ErrInvalidRouting, Subject: kind, Field: "routing." + routingField, Problem: "does not form a valid URL"}
	}
	req.GetBody = nil
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// preparedTarget is the Target an adapter's Prepare returns: send carries
// an attempt's arguments along the routing the adapter parsed once. It
// refuses a spec that broker.ValidateSpec refuses, never passes the key
// on, and reports secrets (if non-nil) so the orchestrator scrubs them
// from the answers.
func preparedTarget(send func(ctx context.Context, arguments []byte) retry.Result, secrets func() []string) retry.Target {
	return &prepared{send: send, secrets: secrets}
}

type prepared struct {
	send    func(ctx context.Context, arguments []byte) retry.Result
	secrets func() []string
}

func (p *prepared) Send(ctx context.Context, a retry.Attempt) retry.Result {
	if err := broker.ValidateSpec(a.Spec); err != nil {
		return broker.Refused(err)
	}
	return p.send(ctx, a.Arguments)
}

func (p *prepared) Secrets() []string {
	if p.secrets == nil {
		return nil
	}
	return p.secrets()
}

var _ retry.SecretHolder = (*prepared)(nil)
