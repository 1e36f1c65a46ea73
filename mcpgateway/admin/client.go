package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/obol-gateway/obol/internal/printable"
)

// Client calls a gateway's admin API with an approver key. Its methods
// answer the API's own shapes; a refusal is an [*Error] with the gateway's
// reason and message (and, for an advance refused records_live, the
// [Advance] too).
type Client struct {
	// BaseURL is the gateway's URL, without a trailing slash.
	BaseURL string
	// Key is the approver key, sent as "Authorization: Bearer <key>" only.
	Key string
	// HTTP sends the requests. If nil, [http.DefaultClient].
	HTTP *http.Client
}

// ListRequest names a page of a listing: one workspace's ("" for every
// configured one), from Cursor ("" for the start), up to Limit items (0:
// the gateway's page size).
type ListRequest struct {
	Workspace string
	Cursor    string
	Limit     int
}

func (l ListRequest) query() url.Values {
	q := url.Values{}
	if l.Workspace != "" {
		q.Set("workspace", l.Workspace)
	}
	if l.Cursor != "" {
		q.Set("cursor", l.Cursor)
	}
	if l.Limit > 0 {
		q.Set("limit", fmt.Sprint(l.Limit))
	}
	return q
}

// ListUnknown is GET /v1/unknown: one page of unknown calls.
func (c *Client) ListUnknown(ctx context.Context, req ListRequest) (UnknownPage, error) {
	var p UnknownPage
	err := c.do(ctx, "GET", "/v1/unknown", req.query(), nil, &p)
	return p, err
}

// ListApprovals is GET /v1/approvals: one page of pending approvals.
func (c *Client) ListApprovals(ctx context.Context, req ListRequest) (PendingPage, error) {
	var p PendingPage
	err := c.do(ctx, "GET", "/v1/approvals", req.query(), nil, &p)
	return p, err
}

// Settle is POST /v1/receipts/{key}/resolve: it settles the unknown call
// of key, tool and workspace, answering its receipt.
func (c *Client) Settle(ctx context.Context, workspace, tool, key string, req Resolve) (ListedReceipt, error) {
	var rc ListedReceipt
	err := c.do(ctx, "POST", "/v1/receipts/"+url.PathEscape(key)+"/resolve",
		url.Values{"tool": {tool}, "workspace": {workspace}}, req, &rc)
	return rc, err
}

// Decide is POST /v1/approvals/{ticket}/approve, or /deny.
func (c *Client) Decide(ctx context.Context, ticket string, approve bool) (Ticket, error) {
	verb := "deny"
	if approve {
		verb = "approve"
	}
	var t Ticket
	err := c.do(ctx, "POST", "/v1/approvals/"+url.PathEscape(ticket)+"/"+verb, nil, nil, &t)
	return t, err
}

// PinCapability is POST /v1/capabilities/{name}/pin.
func (c *Client) PinCapability(ctx context.Context, capability, provider string) (Pin, error) {
	var p Pin
	err := c.do(ctx, "POST", "/v1/capabilities/"+url.PathEscape(capability)+"/pin", nil, pinRequest{provider}, &p)
	return p, err
}

// AdvanceScope is POST /v1/scope-version/advance. A refusal that carries
// an advance (records_live, conflict, migrating) answers it with the error.
func (c *Client) AdvanceScope(ctx context.Context, req AdvanceRequest) (Advance, error) {
	var a Advance
	err := c.do(ctx, "POST", "/v1/scope-version/advance", nil, req, &a)
	return a, err
}

// AcknowledgeDataLoss is POST /v1/store/acknowledge-data-loss.
func (c *Client) AcknowledgeDataLoss(ctx context.Context) (Acknowledgement, error) {
	var a Acknowledgement
	err := c.do(ctx, "POST", "/v1/store/acknowledge-data-loss", nil, nil, &a)
	return a, err
}

// ImportTools is POST /v1/tools/import: the gateway reads its upstream MCP
// servers' tools/list again. A refusal is an *[Error]: not_implemented
// (no upstream MCP server), vendor_unreachable (an upstream could not be
// read; the gateway's log says which).
func (c *Client) ImportTools(ctx context.Context) error {
	var a struct {
		Imported bool `json:"imported"`
	}
	return c.do(ctx, "POST", "/v1/tools/import", nil, nil, &a)
}

// maxAnswerBytes bounds an answer read.
const maxAnswerBytes = 64 << 20

// do sends one request and decodes a 2xx answer into out. A refusal is an
// *[Error]; its body is decoded into out as well (an advance's refusal
// carries the advance).
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	u := c.BaseURL + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.Key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		// The error names the URL (never the key, which is in a header).
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("%s %s: %v", method, c.BaseURL+path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %v", method, c.BaseURL+path, err)
	}
	if resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%w: %v", ErrNotAnswer, err)
		}
		return nil
	}
	e := &Error{Body: raw}
	if json.Unmarshal(raw, e) == nil && e.Reason != "" {
		e.Status = resp.StatusCode
		json.Unmarshal(raw, out)
		return e
	}
	// Not a gateway's answer (a proxy's page, say): say so, briefly.
	return &Error{Status: resp.StatusCode, Message: strings.TrimPrefix(ErrNotAnswer.Error(), "admin: ") + ": " + printable.Cut(string(raw), 200), Body: raw}
}

// Unwrap makes an answer that is not the API's match [ErrNotAnswer].
func (e *Error) Unwrap() error {
	if e.Reason == "" {
		return ErrNotAnswer
	}
	return nil
}
