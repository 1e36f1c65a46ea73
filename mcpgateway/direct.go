package mcpgateway

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// serveDirect answers a tools/call of a gateway tool or capability itself,
// reporting false (nothing written) for any request it leaves to the SDK.
func (g *Gateway) serveDirect(w http.ResponseWriter, r *http.Request, env *envelope, ci *callInfo) bool {
	if !env.call || env.id == nil || !g.known(env.name) || !g.directRequest(r) {
		return false
	}
	var meta mcp.Meta
	if len(env.meta) > 0 && string(env.meta) != "null" {
		if json.Unmarshal(env.meta, &meta) != nil {
			return false
		}
	}
	var id any
	if json.Unmarshal(env.id, &id) != nil {
		return false
	}
	rid, err := jsonrpc.MakeID(id)
	if err != nil {
		return false
	}
	req := &mcp.CallToolRequest{
		Params: &mcp.CallToolParamsRaw{Meta: meta, Name: env.name, Arguments: env.args},
		Extra:  &mcp.RequestExtra{TokenInfo: &auth.TokenInfo{UserID: ci.workspace, Extra: map[string]any{tokenExtraCall: ci}}, Header: r.Header},
	}
	res, cerr := g.callTool(r.Context(), req)
	resp := &jsonrpc.Response{ID: rid, Error: cerr}
	if cerr == nil {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(res); err != nil {
			resp.Error = err
		} else {
			resp.Result = bytes.TrimRight(buf.Bytes(), "\n")
		}
	}
	data, err := jsonrpc.EncodeMessage(resp)
	if err != nil {
		return false
	}
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(data)
	return true
}

// directRequest reports whether the SDK would serve r's headers as they
// are: its checks, repeated.
func (g *Gateway) directRequest(r *http.Request) bool {
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && la != nil {
		if h, _, err := net.SplitHostPort(la.String()); err == nil {
			if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
				host := r.Host
				if hh, _, err := net.SplitHostPort(host); err == nil {
					host = hh
				}
				host = strings.Trim(host, "[]")
				if ip := net.ParseIP(host); (ip == nil || !ip.IsLoopback()) && host != "localhost" {
					return false
				}
			}
		}
	}
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" && v != "2025-06-18" && v != "2025-03-26" && v != "2025-11-25" {
		return false
	}
	ct := r.Header.Get("Content-Type")
	if ct != "application/json" {
		return false
	}
	jsonOK, streamOK := false, false
	for _, v := range r.Header.Values("Accept") {
		for _, raw := range strings.Split(v, ",") {
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK && streamOK
}
