package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestVendorTruthFindsDuplicates drives the stand-in vendors directly and
// checks that the duplicate rules see what they must: two effects of an
// unsupported slot, two vendor keys of a header slot, the client's key at
// the vendor; and nothing for a slot whose retry the vendor deduplicated.
func TestVendorTruthFindsDuplicates(t *testing.T) {
	v, err := newVendors(time.Second, func(string, string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	defer v.close()
	w := &world{vend: v, slots: map[string]*slot{}, obs: map[string]*observation{}, history: map[string][]event{}}
	ten := tenant{id: "ws_a", marker: "mk_a"}
	send := func(s *slot, path, key string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(context.Background(), "POST", v.URL+path, strings.NewReader(string(s.args)))
		req.Header.Set("Authorization", "Bearer sk_soak_test")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	mk := func(tool string, vendorKB bool, key string) *slot {
		return w.slotFor(ten, toolInfo{name: tool, vendorKB: vendorKB}, key)
	}
	chat := mk("chat.post", false, "idt_00000000000000000000000000000001")
	send(chat, "/echo/chat", "")
	send(chat, "/echo/chat", "")
	twoKeys := mk("pay.charge", true, "idt_00000000000000000000000000000002")
	send(twoKeys, "/stripe/v1/charges", "idt_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
	send(twoKeys, "/stripe/v1/charges", "idt_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")
	clientKey := mk("pay.charge", true, "idt_00000000000000000000000000000003")
	send(clientKey, "/stripe/v1/charges", clientKey.key)
	deduped := mk("pay.charge", true, "idt_00000000000000000000000000000004")
	send(deduped, "/stripe/v1/charges", "idt_cccccccccccccccccccccccccccccccc")
	send(deduped, "/stripe/v1/charges", "idt_cccccccccccccccccccccccccccccccc")

	bad := w.checkVendorTruth()
	for _, want := range []struct{ inv, slot string }{
		{"duplicates", chat.id}, {"duplicates", twoKeys.id}, {"client_key_at_vendor", clientKey.id},
	} {
		if _, ok := bad[want.inv][want.slot]; !ok {
			t.Errorf("%s not found for %s; found %v", want.inv, want.slot, bad)
		}
	}
	for inv, m := range bad {
		if _, ok := m[deduped.id]; ok {
			t.Errorf("%s reported for a retry the vendor deduplicated: %s", inv, m[deduped.id])
		}
	}
	if got := v.seenCount(deduped.id); got != 2 || !v.performed(deduped.id) {
		t.Errorf("deduplicated slot: seen %d, performed %v; want 2, true", got, v.performed(deduped.id))
	}
	var body callBody
	if err := json.Unmarshal(deduped.args, &body); err != nil || body.Slot != deduped.id || body.Marker != "mk_a" {
		t.Errorf("slot arguments %s: %v", deduped.args, err)
	}
}
