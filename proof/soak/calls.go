package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/obol-gateway/obol/receipt"
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
	result     struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		Meta struct {
			Key      string          `json:"dev.obol/idempotency-key"`
			Receipt  receipt.Receipt `json:"dev.obol/receipt"`
			Approval *struct {
				Ticket string `json:"ticket"`
				Status string `json:"status"`
			} `json:"dev.obol/approval"`
		} `json:"_meta"`
	}
	body []byte
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

// callTool sends one tools/call with key as Idempotency-Key, and an approval
// ticket in _meta when one is given.
func callTool(ctx context.Context, base, apiKey, tool, key, ticket string, args json.RawMessage) reply {
	params := map[string]any{"name": tool, "arguments": args}
	if ticket != "" {
		params["_meta"] = map[string]any{"dev.obol/approval-ticket": ticket}
	}
	p, _ := json.Marshal(params)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + string(p) + `}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/mcp", strings.NewReader(body))
	if err != nil {
		return reply{transport: err}
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Idempotency-Key", key)
	resp, err := httpClient.Do(req)
	if err != nil {
		return reply{transport: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	r := reply{httpStatus: resp.StatusCode, body: raw}
	if err != nil {
		r.transport = err
		return r
	}
	var env struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Data struct {
				Reason string `json:"reason"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		r.transport = fmt.Errorf("HTTP %d, undecodable body: %w", resp.StatusCode, err)
		return r
	}
	if env.Error != nil {
		r.refused, r.reason = true, env.Error.Data.Reason
		return r
	}
	if err := json.Unmarshal(env.Result, &r.result); err != nil {
		r.transport = fmt.Errorf("result: %w", err)
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
