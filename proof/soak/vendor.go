package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// vendorMode is how a vendor route answers while a fault is on.
type vendorMode string

const (
	modeNormal vendorMode = "normal"
	mode503    vendorMode = "503"    // refuses before doing anything: no effect
	modeHangup vendorMode = "hangup" // does the effect, then hangs up without an answer
	modeStall  vendorMode = "stall"  // does the effect, then answers only after the tool's timeout
)

// route is one vendor endpoint of the stand-in vendors.
type route struct {
	name    string // e.g. "stripe"; the fault schedule addresses routes by it
	dedup   bool   // deduplicates on the key it receives and replays its first answer
	keyFrom string // "header:NAME", "body:/idem", "body:/meta/key" or "" (no key)
	echo    bool   // echoes the request headers into its answer
	delay   time.Duration
}

// effect is one side effect a vendor performed.
type effect struct {
	at        time.Time
	vendorKey string
	route     string
}

// vendors is every stand-in vendor and federated broker on one loopback
// HTTP server, and the ground truth of what they did: per slot, the
// requests seen and the effects performed.
type vendors struct {
	srv    *http.Server
	ln     net.Listener
	URL    string
	routes map[string]*route       // by path prefix, e.g. "/stripe/v1/charges"
	mcp    map[string]*mcpUpstream // by path (mcpvendor.go)

	mu            sync.Mutex
	modes         map[string]vendorMode // route name -> mode
	seen          map[string]int        // slot -> requests
	effects       map[string][]effect   // slot -> effects performed
	answers       map[string][]byte     // vendor key -> first answer (dedup vendors)
	keyOwner      map[string]string     // vendor key -> slot it was first seen with
	keyExec       map[string]int        // "route|vendor key" -> executions (MCP upstreams)
	forwardedMeta map[string][]string   // slot -> client _meta members an MCP upstream received
	mcpStats      map[string]int        // what the MCP upstreams saw and did, for the table
	seq           int
	badAuth       int
	brokerRetr    int // broker requests that asked the broker to retry
	log           func(slot, format string, args ...any)
	stall         time.Duration
}

func newVendors(stall time.Duration, log func(slot, format string, args ...any)) (*vendors, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("soak: vendor listen: %w", err)
	}
	v := &vendors{
		ln: ln, URL: "http://" + ln.Addr().String(),
		routes: map[string]*route{
			"/stripe/v1/charges":  {name: "stripe", dedup: true, keyFrom: "header:Idempotency-Key"},
			"/stripe/v1/refunds":  {name: "stripe", dedup: true, keyFrom: "header:Idempotency-Key"},
			"/echo/contact":       {name: "echo", dedup: true, keyFrom: "body:idem", echo: true},
			"/echo/chat":          {name: "chat", echo: true},
			"/slow/export":        {name: "slow", dedup: true, keyFrom: "header:X-Export-Key", delay: 3 * time.Second},
			"/mail/a":             {name: "mail", dedup: true, keyFrom: "header:Idempotency-Key"},
			"/mail/b":             {name: "mail", dedup: true, keyFrom: "body:meta.key"},
			"/nango/proxy/issues": {name: "nango"},
			"/composio/api/v3/tools/execute/GMAIL_SEND_EMAIL": {name: "composio"},
		},
		modes: map[string]vendorMode{}, seen: map[string]int{}, effects: map[string][]effect{},
		mcp: map[string]*mcpUpstream{
			"/mcp/stateless": {name: "mcp", live: map[string]bool{}},
			"/mcp/sessions":  {name: "mcp_sessions", sessions: true, live: map[string]bool{}},
		},
		answers: map[string][]byte{}, keyOwner: map[string]string{}, log: log, stall: stall,
		keyExec: map[string]int{}, forwardedMeta: map[string][]string{}, mcpStats: map[string]int{},
	}
	v.srv = &http.Server{Handler: http.HandlerFunc(v.serve), ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = v.srv.Serve(ln) }()
	return v, nil
}

func (v *vendors) close() { _ = v.srv.Close() }

// routeNames are the names the fault schedule may put into a mode.
var routeNames = []string{"stripe", "echo", "chat", "slow", "mail", "nango", "composio"}

func (v *vendors) setMode(name string, m vendorMode) {
	v.mu.Lock()
	v.modes[name] = m
	v.mu.Unlock()
}

// callBody is what every soak call sends as its arguments: the slot it
// belongs to and its tenant's marker, which the vendors put into answers.
type callBody struct {
	Slot   string `json:"slot"`
	Marker string `json:"marker"`
	Amount int    `json:"amount"`
	Idem   string `json:"idem,omitempty"`
	Meta   *struct {
		Key string `json:"key"`
	} `json:"meta,omitempty"`
	Arguments *callBody `json:"arguments,omitempty"` // composio wraps the arguments
}

func (v *vendors) serve(w http.ResponseWriter, r *http.Request) {
	if up := v.mcp[r.URL.Path]; up != nil {
		v.serveMCP(w, r, up)
		return
	}
	rt := v.routes[r.URL.Path]
	if rt == nil {
		http.Error(w, "no such route", http.StatusNotFound)
		return
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var b callBody
	_ = json.Unmarshal(raw, &b)
	if b.Arguments != nil {
		b = *b.Arguments
	}
	key := ""
	switch {
	case strings.HasPrefix(rt.keyFrom, "header:"):
		key = r.Header.Get(strings.TrimPrefix(rt.keyFrom, "header:"))
	case rt.keyFrom == "body:idem":
		key = b.Idem
	case rt.keyFrom == "body:meta.key" && b.Meta != nil:
		key = b.Meta.Key
	}

	v.mu.Lock()
	mode := v.modes[rt.name]
	if mode == "" {
		mode = modeNormal
	}
	v.seen[b.Slot]++
	v.seq++
	n := v.seq
	if rt.name == "nango" && r.Header.Get("Retries") != "0" || r.Header.Get("Retry-On") != "" {
		v.brokerRetr++
	}
	if !strings.Contains(r.Header.Get("Authorization")+r.Header.Get("X-Api-Key"), "_soak_") {
		v.badAuth++
	}
	v.log(b.Slot, "vendor %s: request #%d key=%q mode=%s", r.URL.Path, v.seen[b.Slot], key, mode)
	if mode == mode503 {
		v.mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	var answer []byte
	if rt.dedup && key != "" {
		if prev, ok := v.answers[key]; ok {
			answer = prev
			v.log(b.Slot, "vendor %s: deduplicated on key %q, first answer replayed", r.URL.Path, key)
		}
	}
	if answer == nil {
		// The effect happens now, before any answer can be lost.
		v.effects[b.Slot] = append(v.effects[b.Slot], effect{at: time.Now(), vendorKey: key, route: rt.name})
		if key != "" {
			if _, ok := v.keyOwner[key]; !ok {
				v.keyOwner[key] = b.Slot
			}
		}
		out := map[string]any{"id": fmt.Sprintf("obj_%d", n), "slot": b.Slot, "marker": b.Marker}
		if rt.echo {
			h := map[string]string{}
			for k := range r.Header {
				h[k] = r.Header.Get(k)
			}
			out["headers"] = h
		}
		if rt.name == "composio" {
			out = map[string]any{"data": out, "error": nil, "successful": true}
		}
		answer, _ = json.Marshal(out)
		if rt.dedup && key != "" {
			v.answers[key] = answer
		}
		v.log(b.Slot, "vendor %s: effect performed (effect #%d of the slot)", r.URL.Path, len(v.effects[b.Slot]))
	}
	v.mu.Unlock()

	switch mode {
	case modeHangup:
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				_ = c.Close()
				return
			}
		}
	case modeStall:
		time.Sleep(v.stall)
	}
	if rt.delay > 0 {
		time.Sleep(rt.delay)
	}
	w.Header().Set("Content-Type", "application/json")
	status := http.StatusCreated
	if rt.name == "composio" || rt.name == "nango" {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = w.Write(answer)
}

// performed is the vendor's own truth about a slot, as an operator would
// learn it from the vendor: whether any effect happened.
func (v *vendors) performed(slot string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.effects[slot]) > 0
}

// seenCount is how many requests of slot reached a vendor.
func (v *vendors) seenCount(slot string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.seen[slot]
}

// slotTruth is what the vendors know of one slot.
type slotTruth struct {
	seen        int
	effects     int
	vendorKeys  []string    // distinct keys of the effects ("" for none)
	effectTimes []time.Time // when each effect happened, in order
	foreignKey  bool        // a key first seen with another slot
	// keyExecutions is the executions per vendor key of an MCP upstream
	// ("upstream|key"), and forwardedMeta the client's _meta members one
	// received.
	keyExecutions map[string]int
	forwardedMeta []string
}

func (v *vendors) truth() map[string]slotTruth {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make(map[string]slotTruth, len(v.seen))
	for slot, n := range v.seen {
		t := slotTruth{seen: n, effects: len(v.effects[slot]), forwardedMeta: v.forwardedMeta[slot]}
		keys := map[string]bool{}
		for _, e := range v.effects[slot] {
			if n := v.keyExec[e.route+"|"+e.vendorKey]; n > 0 && e.vendorKey != "" {
				if t.keyExecutions == nil {
					t.keyExecutions = map[string]int{}
				}
				t.keyExecutions[e.route+"|"+e.vendorKey] = n
			}
			t.effectTimes = append(t.effectTimes, e.at)
			keys[e.vendorKey] = true
			if e.vendorKey != "" && v.keyOwner[e.vendorKey] != slot {
				t.foreignKey = true
			}
		}
		for k := range keys {
			t.vendorKeys = append(t.vendorKeys, k)
		}
		sort.Strings(t.vendorKeys)
		out[slot] = t
	}
	return out
}

func (v *vendors) counters() (badAuth, brokerRetries int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.badAuth, v.brokerRetr
}
