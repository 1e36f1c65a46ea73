package mcpgateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/receipt"
	"github.com/obol-gateway/obol/retry"
)

func safeText(p *bool) string {
	switch {
	case p == nil:
		return "absent"
	case *p:
		return "true"
	}
	return "false"
}

// designSafeTable reads the safe_new_key table of docs/DESIGN.md, "refserver
// wire contract": reason -> true, false, absent or read.
func designSafeTable(t *testing.T) map[string]string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "DESIGN.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "| reason | `safe_new_key` | why |")
	if !ok {
		t.Fatal("DESIGN.md has no safe_new_key table")
	}
	rows := map[string]string{}
	for _, line := range strings.Split(rest, "\n")[2:] {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			t.Fatalf("row %q", line)
		}
		for _, name := range strings.Split(cells[1], ",") {
			rows[strings.Trim(strings.TrimSpace(name), "`")] = strings.TrimSpace(cells[2])
		}
	}
	if len(rows) < 16 {
		t.Fatalf("table has %d reasons", len(rows))
	}
	return rows
}

// TestSafeNewKeyTable: error.data.safe_new_key of every reason is the one
// docs/DESIGN.md, "refserver wire contract" gives, and every reason DESIGN.md
// lists for refusals is in the table.
func TestSafeNewKeyTable(t *testing.T) {
	table := designSafeTable(t)
	for _, reason := range []string{"malformed_key", "request_mismatch", "in_progress", "destination_conflict",
		"approval_key_mismatch", "outcome_unknown", "policy_denied", "denied", "unknown_tool", "invalid_request",
		"invalid_arguments", "lease_lost", "store_unavailable", "scope_version_conflict", "internal", "out_of_memory",
		"vendor_unreachable"} {
		if _, ok := table[reason]; !ok {
			t.Errorf("DESIGN.md's safe_new_key table lacks %s", reason)
		}
	}
	for reason, want := range table {
		if reason == "denied" || reason == "out_of_memory" {
			continue // read from the record; a store_unavailable
		}
		if got := safeText(refusal{reason: reason}.safeNewKey()); got != want {
			t.Errorf("%s: safe_new_key %s, DESIGN.md says %s", reason, got, want)
		}
	}
	if table["denied"] != "read" || table["out_of_memory"] != table["store_unavailable"] {
		t.Errorf("denied %q, out_of_memory %q", table["denied"], table["out_of_memory"])
	}
}

// TestSafeNewKeyClassified: the errors the orchestrator returns carry the
// table's answer onto the wire, denied the one read from its record.
func TestSafeNewKeyClassified(t *testing.T) {
	s := &Gateway{cfg: Config{Redact: func(s string) string { return s }}}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: bad", idempotency.ErrMalformedKey), "false"},
		{idempotency.ErrRequestMismatch, "false"},
		{&retry.RefusalError{Err: idempotency.ErrInProgress, RetryAfter: time.Second}, "false"},
		{idempotency.ErrDestinationConflict, "false"},
		{idempotency.ErrApprovalKeyMismatch, "false"},
		{idempotency.ErrOutcomeUnknown, "false"},
		{idempotency.ErrScopeVersionConflict, "false"},
		{idempotency.ErrScopeVersionChanged, "false"},
		{fmt.Errorf("finalize: %w", idempotency.ErrStale), "false"},
		{fmt.Errorf("claim: %w: OOM command not allowed", idempotency.ErrStoreUnavailable), "false"},
		{errors.New("boom"), "false"},
		{effectspec.ErrPolicyDenied, "absent"},
		{&refusalError{refusal{reason: "invalid_arguments", status: 400, msg: "x"}}, "absent"},
		{fmt.Errorf("%w: pointer", idempotency.ErrInvalidRequest), "absent"},
		{fmt.Errorf("%w: dup", idempotency.ErrInvalidJSON), "absent"},
		{&retry.RefusalError{Err: idempotency.ErrVendorUnreachable, RetryAfter: time.Second}, "true"},
		{&retry.RefusalError{Err: idempotency.ErrDenied, SafeNewKey: receipt.Safe(true)}, "true"},
		{&retry.RefusalError{Err: idempotency.ErrDenied, SafeNewKey: receipt.Safe(false)}, "false"},
		{&retry.RefusalError{Err: idempotency.ErrDenied}, "absent"},
		{idempotency.ErrDenied, "absent"},
	} {
		r := s.classify(tc.err)
		var d ErrorData
		if err := json.Unmarshal(rpcError(r, "").Data, &d); err != nil {
			t.Fatal(err)
		}
		if got := safeText(d.SafeNewKey); got != tc.want {
			t.Errorf("%v (%s): safe_new_key %s, want %s", tc.err, r.reason, got, tc.want)
		}
	}
}

// TestTransportText: a transport refusal names the header to fix.
func TestTransportText(t *testing.T) {
	for body, want := range map[string]string{
		"Content-Type must be 'application/json'\n":                             "Content-Type header",
		"Accept must contain both 'application/json' and 'text/event-stream'\n": "Accept header",
		"something else\n": "HTTP 400",
	} {
		if got := transportText(http.StatusBadRequest, []byte(body)); !strings.Contains(got, want) || strings.Contains(got, "'") {
			t.Errorf("%q: %q, want it to name %q in our own words", body, got, want)
		}
	}
}
