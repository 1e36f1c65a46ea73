package mcpgateway

import (
	"bytes"
	"encoding/json"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The direct path. The SDK's stateless handler builds, for every POST, a
// session, a JSON-RPC connection with its goroutines, a 32 KiB decoder
// buffer per decode and the answer's encoding through three Marshalers:
// about 100 µs of CPU per tools/call on the bench machine (examples/bench,
// row 4), more than the rest of refserver's call. The front has already
// read the message strictly (parseEnvelope), so for the one message that
// matters it calls the tool handler itself and encodes the answer as the
// SDK does, byte for byte (TestDirectMatchesSDK, FuzzDirect). Everything
// else, and any tools/call whose headers or protocol version the SDK would
// treat otherwise, still goes to the SDK.

// newProtocol is the first protocol version whose requests the SDK serves
// without the old session model (SEP-2575): those go to the SDK.
const newProtocol = "2026-07-28"

// directVersions are the MCP-Protocol-Version values the direct path
// serves: the SDK's, before newProtocol. An absent header is served too.
func directVersions() []string {
	return slices.DeleteFunc(mcp.SupportedProtocolVersions(), func(v string) bool { return v >= newProtocol })
}

// legacySessions reports the SDK's compatibility switch under which a
// stateless server reads Mcp-Session-Id: the direct path then stays off.
func legacySessions() bool {
	for _, kv := range strings.Split(os.Getenv("MCPGODEBUG"), ",") {
		if strings.TrimSpace(kv) == "allowsessionsinstateless=1" {
			return true
		}
	}
	return false
}

// serveDirect answers a tools/call of one of the gateway's tools or
// capabilities as the SDK's handler would, and reports whether it did;
// false means nothing was written and the request goes to the SDK.
func (g *Gateway) serveDirect(w http.ResponseWriter, r *http.Request, env *envelope, ci *callInfo) bool {
	if !env.call || env.id == nil || !g.known(env.name) || !g.directRequest(r) {
		return false
	}
	var meta mcp.Meta
	if len(env.meta) > 0 && json.Unmarshal(env.meta, &meta) != nil {
		return false
	}
	// As the SDK decodes an id: a number becomes a float64, which MakeID
	// turns into an integer id (the front admits only integers).
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
		Extra: &mcp.RequestExtra{
			TokenInfo: &auth.TokenInfo{UserID: ci.workspace, Extra: map[string]any{tokenExtraCall: ci}},
			Header:    r.Header,
		},
	}
	if g.onDirect != nil {
		g.onDirect()
	}
	res, cerr := g.callTool(r.Context(), req)
	resp := &jsonrpc.Response{ID: rid, Error: cerr}
	if cerr == nil {
		if res.Content == nil {
			// As the SDK's Server.callTool: never "content": null.
			res.Content = []mcp.Content{}
		}
		if resp.Result, err = encodeResult(res); err != nil {
			resp.Error = err
		}
	}
	data, err := jsonrpc.EncodeMessage(resp)
	if err != nil {
		// Unreachable for what callTool returns; the SDK answers an
		// encoding failure as a transport error, which finish rewrites.
		http.Error(w, "internal error", http.StatusInternalServerError)
		return true
	}
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(data)
	return true
}

// encodeResult encodes res as the SDK's JSON-RPC layer does: encoding/json
// without HTML escaping, no trailing newline.
func encodeResult(res *mcp.CallToolResult) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(res); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// directRequest reports whether the SDK would pass r's headers on to the
// tool handler: its DNS-rebinding check, protocol version, Content-Type and
// Accept checks, repeated here; a request they would refuse or route
// otherwise goes to the SDK, which answers it.
func (g *Gateway) directRequest(r *http.Request) bool {
	if g.noDirect {
		return false
	}
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && la != nil && loopback(la.String()) && !loopback(r.Host) {
		return false
	}
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" && !slices.Contains(g.directVersions, v) {
		return false
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
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

// loopback is the SDK's test of a loopback address or Host: "localhost",
// or a loopback IP, with or without a port.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
