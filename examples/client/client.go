package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/obol-gateway/obol/receipt"
)

// The result _meta members of the gateway (docs/DESIGN.md, "refserver wire
// contract").
const (
	metaKey     = "dev.obol/idempotency-key"
	metaReceipt = "dev.obol/receipt"
)

// Client is one MCP session with the gateway.
type Client struct {
	session *mcp.ClientSession
}

// Dial connects to the gateway's MCP endpoint at gatewayURL + "/mcp" with
// apiKey as the Bearer key. If base is nil, http.DefaultTransport is used.
// The transport never retries on its own: a retry is the caller's decision,
// with a key.
func Dial(ctx context.Context, gatewayURL, apiKey string, base http.RoundTripper) (*Client, error) {
	if base == nil {
		base = http.DefaultTransport
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "obol-example-client", Version: "1"}, nil)
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:             gatewayURL + "/mcp",
		HTTPClient:           &http.Client{Transport: &transport{base: base, apiKey: apiKey}},
		DisableStandaloneSSE: true,
		MaxRetries:           -1,
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("client: connect: %w", err)
	}
	return &Client{session: s}, nil
}

// Close ends the session.
func (c *Client) Close() error { return c.session.Close() }

// Call is one tools/call.
type Call struct {
	Tool      string
	Arguments any
	// Key is sent as the Idempotency-Key header. If empty, the gateway mints
	// one and returns it in the Answer.
	Key string
	// LoseReply makes the transport read the gateway's whole answer and
	// report ErrReplyLost instead, as a connection cut at that moment would.
	LoseReply bool
}

// Answer is a tools/call result: accepted, or an isError result whose receipt
// says definitely_rejected or unknown.
type Answer struct {
	HeaderKey string          // the Idempotency-Key response header
	MetaKey   string          // _meta["dev.obol/idempotency-key"]
	Receipt   receipt.Receipt // _meta["dev.obol/receipt"]
	Text      string          // the vendor's body
	IsError   bool
}

// Refusal is a tools/call the gateway refused before or instead of
// dispatching it, as a JSON-RPC error with a stable reason.
type Refusal struct {
	Reason string `json:"reason"`
	Status int    `json:"status"`
	// Key is the effective idempotency key; empty when none could be read
	// (malformed_key).
	Key string `json:"idempotency_key"`
	// RetryAfterMS is set with in_progress: when to call again with Key.
	RetryAfterMS int64 `json:"retry_after_ms"`
	// SafeNewKey says whether calling again under a new key is safe: nil
	// when the gateway does not know, false when the call ran or may have
	// (retry with Key, never a new key).
	SafeNewKey *bool `json:"safe_new_key"`
}

func (r *Refusal) Error() string {
	return fmt.Sprintf("client: refused: %s (%d)", r.Reason, r.Status)
}

// Call sends call and returns the gateway's answer, a *Refusal, or an error
// of the transport (ErrReplyLost among them).
func (c *Client) Call(ctx context.Context, call Call) (*Answer, error) {
	h := &hooks{key: call.Key, loseReply: call.LoseReply}
	res, err := c.session.CallTool(context.WithValue(ctx, hooksKey{}, h),
		&mcp.CallToolParams{Name: call.Tool, Arguments: call.Arguments})
	if err != nil {
		var we *jsonrpc.Error
		if errors.As(err, &we) && len(we.Data) > 0 {
			r := &Refusal{}
			if json.Unmarshal(we.Data, r) == nil && r.Reason != "" {
				return nil, r
			}
		}
		return nil, err
	}
	a := &Answer{HeaderKey: h.responseKey(), IsError: res.IsError}
	a.MetaKey, _ = res.Meta[metaKey].(string)
	raw, err := json.Marshal(res.Meta[metaReceipt])
	if err != nil {
		return nil, fmt.Errorf("client: receipt: %w", err)
	}
	if err := json.Unmarshal(raw, &a.Receipt); err != nil {
		return nil, fmt.Errorf("client: receipt: %w", err)
	}
	if a.Receipt.IdempotencyKey == "" {
		return nil, errors.New("client: the answer carries no receipt")
	}
	for _, ct := range res.Content {
		if tc, ok := ct.(*mcp.TextContent); ok {
			a.Text = tc.Text
			break
		}
	}
	return a, nil
}

// hooks is what one call asks of the transport. The SDK has no per-call
// headers, but it sends each call's request with the call's context.
type hooks struct {
	key       string
	loseReply bool

	mu     sync.Mutex
	header string
}

func (h *hooks) responseKey() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.header
}

type hooksKey struct{}

// transport adds the Bearer key to every request and, for a call, its
// Idempotency-Key; it records the key the gateway answers with.
type transport struct {
	base   http.RoundTripper
	apiKey string
}

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	h, _ := r.Context().Value(hooksKey{}).(*hooks)
	r = r.Clone(r.Context()) // a RoundTripper must not change its request
	r.Header.Set("Authorization", "Bearer "+t.apiKey)
	if h != nil && h.key != "" {
		r.Header.Set("Idempotency-Key", h.key)
	}
	resp, err := t.base.RoundTrip(r)
	if err != nil || h == nil {
		return resp, err
	}
	h.mu.Lock()
	h.header = resp.Header.Get("Idempotency-Key")
	h.mu.Unlock()
	if h.loseReply {
		// Read to the end, so the gateway has answered in full, then drop it.
		_, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		return nil, ErrReplyLost
	}
	return resp, nil
}
