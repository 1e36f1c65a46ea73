package refservertest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/obol-gateway/obol/receipt"
)

// Client sends JSON-RPC requests to a server's /mcp endpoint.
type Client struct {
	// Base is the server's URL, as in [Server.Base].
	Base string
	// APIKey is sent as "Authorization: Bearer APIKey"; empty sends none.
	APIKey string
	// HTTP carries the requests; nil means http.DefaultClient. A POST is
	// never retried by net/http, so a request is sent at most once.
	HTTP *http.Client
}

// Request is one tools/call.
type Request struct {
	Tool string
	Args any
	// Key is sent as the Idempotency-Key header; empty sends none.
	Key string
	// MetaKey is sent as _meta["dev.obol/idempotency-key"]; empty sends none.
	MetaKey string
	// Ticket is sent as _meta["dev.obol/approval-ticket"]; empty sends none.
	Ticket string
	// Header, if set, edits the request's headers last.
	Header func(http.Header)
}

// Reply is one answer to a JSON-RPC request.
type Reply struct {
	// HTTPStatus is the answer's status; zero when the request failed
	// below HTTP.
	HTTPStatus int
	// Err is a failure below JSON-RPC: the request could not be sent or
	// read (the server died), or the body is not a JSON-RPC answer.
	Err error
	// Body is the answer's body as it came off the wire.
	Body []byte
	// Error is the JSON-RPC error member; nil on a result.
	Error *RPCError
	// Result is the result member; zero on an error.
	Result Result
}

// RPCError is a JSON-RPC error: a refusal carries its reason in Data.
type RPCError struct {
	Code    int       `json:"code"`
	Message string    `json:"message"`
	Data    ErrorData `json:"-"`
	// RawData is error.data as it came off the wire.
	RawData json.RawMessage `json:"data"`
}

// ErrorData is the data of a refusal (docs/DESIGN.md, "refserver wire
// contract").
type ErrorData struct {
	Reason string `json:"reason"`
	Status int    `json:"status"`
	Key    string `json:"idempotency_key"`
}

// Result is a tools/call result.
type Result struct {
	IsError           bool            `json:"isError"`
	Content           []Content       `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	Meta              Meta            `json:"_meta"`
	// RawMeta is _meta with every member as it came off the wire.
	RawMeta map[string]json.RawMessage `json:"-"`
}

// Content is one content block of a result.
type Content struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// Meta is the gateway's part of a result's _meta.
type Meta struct {
	Key      string          `json:"dev.obol/idempotency-key"`
	Receipt  receipt.Receipt `json:"dev.obol/receipt"`
	Approval *Approval       `json:"dev.obol/approval"`
}

// Approval is a held call's _meta["dev.obol/approval"].
type Approval struct {
	Ticket string `json:"ticket"`
	Status string `json:"status"`
}

// Text is the text of the result's first content block, or "".
func (r Reply) Text() string {
	if len(r.Result.Content) == 0 {
		return ""
	}
	return r.Result.Content[0].Text
}

// Reason is the refusal's reason, or "" on a result.
func (r Reply) Reason() string {
	if r.Error == nil {
		return ""
	}
	return r.Error.Data.Reason
}

func (r Reply) String() string {
	switch {
	case r.Err != nil:
		return "transport error: " + r.Err.Error()
	case r.Error != nil:
		return fmt.Sprintf("refused %s/%d (HTTP %d): %s", r.Error.Data.Reason, r.Error.Data.Status, r.HTTPStatus, r.Error.Message)
	}
	rc := r.Result.Meta.Receipt
	return fmt.Sprintf("result %s attempts=%d replayed=%v text=%.160q", rc.Outcome, rc.AttemptCount, rc.Replayed, r.Text())
}

// CallTool sends one tools/call with the headers an MCP client sends.
func (c Client) CallTool(ctx context.Context, q Request) Reply {
	params := map[string]any{"name": q.Tool, "arguments": q.Args}
	meta := map[string]any{}
	if q.MetaKey != "" {
		meta["dev.obol/idempotency-key"] = q.MetaKey
	}
	if q.Ticket != "" {
		meta["dev.obol/approval-ticket"] = q.Ticket
	}
	if len(meta) > 0 {
		params["_meta"] = meta
	}
	return c.RPC(ctx, "tools/call", params, func(h http.Header) {
		if q.Key != "" {
			h.Set("Idempotency-Key", q.Key)
		}
		if q.Header != nil {
			q.Header(h)
		}
	})
}

// RPC sends one JSON-RPC request, id 1, and decodes the answer; edit, if
// set, changes the request's headers last.
func (c Client) RPC(ctx context.Context, method string, params any, edit func(http.Header)) Reply {
	p, err := json.Marshal(params)
	if err != nil {
		return Reply{Err: fmt.Errorf("refservertest: params: %w", err)}
	}
	body := `{"jsonrpc":"2.0","id":1,"method":` + quote(method) + `,"params":` + string(p) + `}`
	resp, raw, err := c.Post(ctx, strings.NewReader(body), func(req *http.Request) {
		if edit != nil {
			edit(req.Header)
		}
	})
	if resp == nil {
		return Reply{Err: err}
	}
	r := Reply{HTTPStatus: resp.StatusCode, Body: raw, Err: err}
	if err == nil {
		r.decode()
	}
	return r
}

// Post sends body to /mcp as it is, with the headers an MCP client sends
// (edit, if set, changes the request last), and returns the answer with its
// body read and closed. The answer is nil when the request failed below
// HTTP. It is the way to put on the wire what [Client.RPC] would not write.
func (c Client) Post(ctx context.Context, body io.Reader, edit func(*http.Request)) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Base+"/mcp", body)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	if edit != nil {
		edit(req)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp, raw, err
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// decode fills r's Error or Result from r.Body, or sets r.Err.
func (r *Reply) decode() {
	var env struct {
		Result json.RawMessage `json:"result"`
		Error  *RPCError       `json:"error"`
	}
	if err := json.Unmarshal(r.Body, &env); err != nil {
		r.Err = fmt.Errorf("HTTP %d, undecodable body %q: %w", r.HTTPStatus, r.Body, err)
		return
	}
	if env.Error != nil {
		r.Error = env.Error
		if len(env.Error.RawData) > 0 {
			if err := json.Unmarshal(env.Error.RawData, &r.Error.Data); err != nil {
				r.Err = fmt.Errorf("error.data %s: %w", env.Error.RawData, err)
			}
		}
		return
	}
	if len(env.Result) == 0 {
		r.Err = fmt.Errorf("HTTP %d, neither result nor error: %q", r.HTTPStatus, r.Body)
		return
	}
	var meta struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(env.Result, &r.Result); err != nil {
		r.Err = fmt.Errorf("result %s: %w", env.Result, err)
		return
	}
	if err := json.Unmarshal(env.Result, &meta); err == nil {
		r.Result.RawMeta = meta.Meta
	}
}
