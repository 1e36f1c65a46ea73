package receipt_test

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/receipt"
)

// referenceMarshal is the reflection encoder MarshalJSON replaced: its bytes
// are the contract the hand-written one must keep.
func referenceMarshal(r receipt.Receipt) ([]byte, error) {
	type plain receipt.Receipt
	type wire struct {
		plain
		CreatedAt   string              `json:"created_at"`
		FinalizedAt string              `json:"finalized_at,omitempty"`
		Resolution  *receipt.Resolution `json:"resolution,omitempty"` // last, after the times
	}
	format := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	}
	return json.Marshal(wire{plain: plain(r), CreatedAt: format(r.CreatedAt), FinalizedAt: format(r.FinalizedAt), Resolution: r.Resolution})
}

func checkSame(t *testing.T, r receipt.Receipt) {
	t.Helper()
	want, err := referenceMarshal(r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("MarshalJSON differs from encoding/json:\n got %s\nwant %s", got, want)
	}
	// Through json.Marshal too, as callers use it: it compacts and
	// HTML-escapes a Marshaler's bytes, which must leave them as they are.
	if via, err := json.Marshal(r); err != nil || !bytes.Equal(via, want) {
		t.Fatalf("json.Marshal(receipt) = %s, %v; want %s", via, err, want)
	}
}

func TestMarshalJSONMatchesReflection(t *testing.T) {
	full := sample()
	full.Replayed = true
	full.Resolution = &receipt.Resolution{Outcome: effectspec.Accepted, By: "ops@acme", At: full.FinalizedAt, Note: "checked <a&b> \u2028 \"q\""}
	html := sample()
	html.IdempotencyKey, html.Route.Path, html.Workspace = "<script>&amp;</script>", "/a?b=1&c=<2>", `back\slash "quoted"`
	unicode := sample()
	unicode.Tool, unicode.Route.Host, unicode.VendorKey = "line\u2028sep\u2029para", "héllo.example", "日本語"
	invalid := sample()
	invalid.RequestHash, invalid.Route.Fingerprint, invalid.Binding = "bad\xffutf8", "\xc3", "\xed\xa0\x80" // lone surrogate
	control := sample()
	control.KeySource, control.Route.Method, control.Propagation = "\x00\x01\t\n\r\x1f", "\x7f", "\b\f"
	ints := sample()
	ints.AttemptCount, ints.Status = math.MinInt, math.MaxInt
	negative := sample()
	negative.AttemptCount, negative.Status = -1, -500
	zones := sample()
	zones.CreatedAt = time.Date(2026, 3, 29, 1, 30, 0, 999999999, time.FixedZone("", -(9*3600+30*60)))
	zones.FinalizedAt = time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC) // the instant after the zero one
	loc, err := time.LoadLocation("America/New_York")
	if err == nil {
		zones.CreatedAt = zones.CreatedAt.In(loc)
	}
	years := sample()
	years.CreatedAt, years.FinalizedAt = time.Date(-42, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(12345, 12, 31, 23, 59, 59, 0, time.UTC)
	edges := sample()
	edges.CreatedAt, edges.FinalizedAt = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
	beyond := sample()
	beyond.CreatedAt, beyond.FinalizedAt = time.Date(-1, 12, 31, 23, 59, 59, 0, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	minimalRoute := sample()
	minimalRoute.Route = receipt.RouteRecord{Connection: "c", Fingerprint: "f"}
	mcpRoute := sample()
	mcpRoute.Route.Method, mcpRoute.Route.UpstreamTool = "", "create_payment"
	mcpRoute.Binding, mcpRoute.Propagation = "meta", "meta"
	safeTrue, safeFalse, safeNil := sample(), sample(), sample()
	safeTrue.SafeNewKey, safeFalse.SafeNewKey, safeNil.SafeNewKey = receipt.Safe(true), receipt.Safe(false), nil
	zeroRes := sample()
	zeroRes.Resolution = &receipt.Resolution{}
	cases := map[string]receipt.Receipt{
		"zero": {}, "sample": sample(), "full": full, "html": html, "unicode": unicode, "invalid_utf8": invalid,
		"control": control, "extreme_ints": ints, "negative_ints": negative, "zones": zones, "years": years,
		"year_edges": edges, "beyond_year_edges": beyond,
		"minimal_route": minimalRoute, "mcp_route": mcpRoute, "safe_true": safeTrue, "safe_false": safeFalse, "safe_nil": safeNil,
		"zero_resolution": zeroRes,
	}
	// Each byte encoding/json escapes, alone in a string, so no other one
	// sends it down the slow path.
	for _, c := range []string{"\"", "\\", "<", ">", "&", "\x00", "\x1f", "\x7f", "\x80", "\u2028", "\u2029", "é"} {
		r := sample()
		r.Route.Host = "a" + c + "b"
		cases["single_"+strconv.QuoteToASCII(c)] = r
	}
	for name, r := range cases {
		t.Run(name, func(t *testing.T) { checkSame(t, r) })
	}
}

func FuzzReceiptJSON(f *testing.F) {
	f.Add("idt_1", "supplied", "sha256:00", "stripe.create_charge", "ws", "conn", "stripe", "", "POST", "api.stripe.com",
		"/v1/charges", "sha256:0f", "header", "header", "idt_2", "accepted", 1, 201, false, uint8(1|4|32),
		int64(1796032800), int64(123456789), int32(3600), int64(250_000_000), "ops", "note")
	f.Add("<&>", "\u2028", "\xff", "\x00", "", "", "", "t", "", "", "", "", "", "", "", "", -1, 0, true, uint8(6),
		int64(-62135596800), int64(0), int32(0), int64(0), "", "")
	f.Fuzz(func(t *testing.T, key, source, hash, tool, ws, conn, provider, rtool, method, host, path, fp,
		binding, propagation, vendor, outcome string, attempts, status int, replayed bool, flags uint8,
		sec, nsec int64, offset int32, finalizedAfter int64, by, note string) {
		if flags&32 != 0 { // keep to years 0000..9999, the encoder's own digits
			const first, span = -62167219200, 315569520000 // 0000-01-01 UTC, 10000 years
			sec = first + ((sec-first)%span+span)%span     // identity within the range
		}
		created := time.Unix(sec, nsec).In(time.FixedZone("z", int(offset)))
		r := receipt.Receipt{
			IdempotencyKey: key, KeySource: source, RequestHash: hash, Tool: tool, Workspace: ws,
			Route: receipt.RouteRecord{Connection: conn, Provider: provider, Tool: rtool, Method: method, Host: host,
				Path: path, Fingerprint: fp},
			Binding: binding, Propagation: propagation, VendorKey: vendor, AttemptCount: attempts,
			Outcome: effectspec.Outcome(outcome), Status: status, Replayed: replayed, CreatedAt: created,
		}
		// flags: bits 0-1 SafeNewKey (nil, false, true), 2 finalized, 3 resolution, 4 zero CreatedAt;
		// bit 5 (above) four-digit years.
		switch flags & 3 {
		case 1:
			r.SafeNewKey = receipt.Safe(false)
		case 2:
			r.SafeNewKey = receipt.Safe(true)
		}
		if flags&64 != 0 { // bit 6: an MCP route's upstream tool
			r.Route.UpstreamTool = rtool + path
		}
		if flags&4 != 0 {
			r.FinalizedAt = created.Add(time.Duration(finalizedAfter))
		}
		if flags&8 != 0 {
			r.Resolution = &receipt.Resolution{Outcome: effectspec.Outcome(outcome), By: by, At: r.FinalizedAt, Note: note}
		}
		if flags&16 != 0 {
			r.CreatedAt = time.Time{}
		}
		checkSame(t, r)
	})
}

func BenchmarkReceiptMarshal(b *testing.B) {
	r := sample()
	for _, bm := range []struct {
		name string
		enc  func(receipt.Receipt) ([]byte, error)
	}{
		{"reflect", referenceMarshal},
		{"append", receipt.Receipt.MarshalJSON},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bm.enc(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestReceiptJSONOneAllocation: a receipt with every field set (an MCP
// route's upstream tool, both bools, both times, the largest ints) and no
// string that needs an escape encodes in one allocation: the size hint
// covers every key.
func TestReceiptJSONOneAllocation(t *testing.T) {
	r := sample()
	r.Route.UpstreamTool = "create_payment"
	r.AttemptCount, r.Status = math.MinInt, math.MinInt
	r.Replayed, r.SafeNewKey = false, receipt.Safe(false)
	r.FinalizedAt = r.CreatedAt.Add(time.Second)
	if n := testing.AllocsPerRun(100, func() {
		if _, err := r.MarshalJSON(); err != nil {
			t.Fatal(err)
		}
	}); n != 1 {
		t.Errorf("MarshalJSON: %v allocations, want 1", n)
	}
}
