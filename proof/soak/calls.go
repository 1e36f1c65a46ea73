package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/obol-gateway/obol/internal/refservertest"
)

// httpClient carries every call: no retry of its own (a POST is never
// retried by net/http), a generous timeout for a busy machine.
var httpClient = &http.Client{
	Transport: &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 128, IdleConnTimeout: 30 * time.Second},
	Timeout:   90 * time.Second,
}

// reply is one tools/call answer over raw JSON-RPC.
type reply struct {
	httpStatus int
	transport  error
	refused    bool
	reason     string
	result     refservertest.Result
	body       []byte
}

// kind is the reply's class for the outcome table.
func (r reply) kind() string {
	switch {
	case r.transport != nil:
		return "transport_error"
	case r.refused:
		return "refused:" + r.reason
	case r.result.Meta.Approval != nil:
		return "held"
	case r.result.Meta.Receipt.Replayed:
		return "replayed:" + string(r.result.Meta.Receipt.Outcome)
	}
	return "fresh:" + string(r.result.Meta.Receipt.Outcome)
}

func (r reply) String() string {
	switch {
	case r.transport != nil:
		return "transport error: " + r.transport.Error()
	case r.refused:
		return fmt.Sprintf("refused %s (HTTP %d)", r.reason, r.httpStatus)
	}
	rc := r.result.Meta.Receipt
	s := fmt.Sprintf("%s attempts=%d vendor_key=%s", r.kind(), rc.AttemptCount, rc.VendorKey)
	if rc.Resolution != nil {
		s += " resolution=" + string(rc.Resolution.Outcome)
	}
	if len(r.result.Content) > 0 {
		s += fmt.Sprintf(" text=%.160q", r.result.Content[0].Text)
	}
	return s
}

// final reports whether the reply ends the call: a stored outcome other
// than unknown, or a refusal that a retry would not change.
func (r reply) final() bool {
	if r.transport != nil {
		return false
	}
	if r.refused {
		switch r.reason {
		case "denied", "destination_conflict", "request_mismatch", "approval_key_mismatch", "policy_denied":
			return true
		}
		return false
	}
	if r.result.Meta.Approval != nil {
		return false
	}
	o := r.result.Meta.Receipt.Outcome
	return o == "accepted" || o == "definitely_rejected"
}

// callTool sends one tools/call with key as Idempotency-Key (in _meta with
// inMeta), and an approval ticket in _meta when one is given.
func callTool(ctx context.Context, base, apiKey, tool, key, ticket string, inMeta bool, args json.RawMessage) reply {
	c := refservertest.Client{Base: base, APIKey: apiKey, HTTP: httpClient}
	q := refservertest.Request{Tool: tool, Args: args, Key: key, Ticket: ticket}
	if inMeta {
		q.Key, q.MetaKey = "", key
	}
	a := c.CallTool(ctx, q)
	r := reply{httpStatus: a.HTTPStatus, transport: a.Err, result: a.Result, body: a.Body}
	if a.Error != nil {
		r.refused, r.reason, r.transport = true, a.Reason(), nil
	}
	return r
}

// rest sends one request to a gateway's REST endpoints and returns the
// status and body (status 0 on a transport error).
func rest(ctx context.Context, method, url, bearer string, body []byte) (int, []byte) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil
	}
	return resp.StatusCode, raw
}
