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

// TestVendorTruthCountsRedispatchAfterAcknowledgedLoss: a second effect of
// an unsupported slot is counted apart only when the slot's record was
// exposed to a store loss and the effect came after the acknowledgement;
// one between the loss and the acknowledgement, one of a slot the loss did
// not touch, and a third effect after one acknowledgement are duplicates.
func TestVendorTruthCountsRedispatchAfterAcknowledgedLoss(t *testing.T) {
	v, err := newVendors(time.Second, func(string, string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	defer v.close()
	w := &world{vend: v, slots: map[string]*slot{}, obs: map[string]*observation{}, history: map[string][]event{}}
	ten := tenant{id: "ws_a", marker: "mk_a"}
	send := func(s *slot) {
		t.Helper()
		req, _ := http.NewRequestWithContext(context.Background(), "POST", v.URL+"/echo/chat", strings.NewReader(string(s.args)))
		req.Header.Set("Authorization", "Bearer sk_soak_test")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	// Effects a millisecond apart, so no two share an instant.
	tick := func() time.Time { time.Sleep(2 * time.Millisecond); return time.Now() }
	mk := func(n string) *slot {
		return w.slotFor(ten, toolInfo{name: "chat.post"}, "idt_0000000000000000000000000000000"+n)
	}
	afterAck, beforeAck, untouched, thrice := mk("1"), mk("2"), mk("3"), mk("4")
	for _, s := range []*slot{afterAck, beforeAck, untouched, thrice} {
		send(s)
	}
	loss := &storeLoss{kind: "store_emptied", exposed: map[string]bool{afterAck.id: true, beforeAck.id: true, thrice.id: true}}
	loss.lostAt = tick()
	send(beforeAck) // dispatched again before the operator acknowledged
	loss.ackAt = tick()
	loss.acked = true
	w.loss.losses = []*storeLoss{loss}
	tick()
	for _, s := range []*slot{afterAck, untouched, thrice, thrice} {
		send(s)
	}

	bad := w.checkVendorTruth()
	for _, s := range []*slot{beforeAck, untouched, thrice} {
		if _, ok := bad["duplicates"][s.id]; !ok {
			t.Errorf("no duplicate reported for %s; found %v", s.id, bad)
		}
	}
	if d, ok := bad["duplicates"][afterAck.id]; ok {
		t.Errorf("a redispatch after the acknowledgement is reported as a duplicate: %s", d)
	}
	n := func(s *slot) int { return w.redispatched[s.id][afterAcknowledgement] }
	if n(afterAck) != 1 || n(thrice) != 1 || n(beforeAck) != 0 || n(untouched) != 0 {
		t.Errorf("counted apart: %v; want 1 for %s and %s only", w.redispatched, afterAck.id, thrice.id)
	}
}

// TestVendorTruthClusterLossBeforeTheMarker: on a Cluster, a second effect
// of an exposed slot after the loss began and before it could reach every
// gateway (markerReach after it was seen) is counted apart; one later
// (still before the acknowledgement), one of a loss nobody saw, and one on
// the single Redis are duplicates; a loss still open defers the verdict.
func TestVendorTruthClusterLossBeforeTheMarker(t *testing.T) {
	v, err := newVendors(time.Second, func(string, string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	defer v.close()
	w := &world{vend: v, slots: map[string]*slot{}, obs: map[string]*observation{}, history: map[string][]event{}}
	ten := tenant{id: "ws_a", marker: "mk_a"}
	send := func(s *slot) {
		t.Helper()
		req, _ := http.NewRequestWithContext(context.Background(), "POST", v.URL+"/echo/chat", strings.NewReader(string(s.args)))
		req.Header.Set("Authorization", "Bearer sk_soak_test")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	tick := func() time.Time { time.Sleep(2 * time.Millisecond); return time.Now() }
	mk := func(n string) *slot {
		return w.slotFor(ten, toolInfo{name: "chat.post"}, "idt_0000000000000000000000000000001"+n)
	}
	early, late, unseen, single := mk("1"), mk("2"), mk("3"), mk("4")
	for _, s := range []*slot{early, late, unseen, single} {
		send(s)
	}
	seen := &storeLoss{kind: "store_restored_from_snapshot", cluster: true, exposed: map[string]bool{early.id: true, late.id: true}}
	blind := &storeLoss{kind: "store_restored_from_snapshot", cluster: true, exposed: map[string]bool{unseen.id: true}}
	flat := &storeLoss{kind: "store_restored_from_snapshot", exposed: map[string]bool{single.id: true}}
	for _, l := range []*storeLoss{seen, blind, flat} {
		l.lostAt = tick()
		l.lostEnd = tick()
	}
	w.loss.losses = []*storeLoss{seen, blind, flat}
	w.loss.open = true
	send(early)
	send(unseen)
	send(single)
	if bad := w.checkVendorTruth(); len(bad["duplicates"]) != 0 {
		t.Errorf("judged while the loss is open: %v", bad)
	}
	w.loss.open = false
	seen.detectedAt = time.Now()
	flat.detectedAt = seen.detectedAt
	seen.detectedAt = seen.detectedAt.Add(-markerReach) // the window ends now
	time.Sleep(2 * time.Millisecond)
	send(late)
	seen.ackAt, seen.acked = tick(), true

	bad := w.checkVendorTruth()
	if d, ok := bad["duplicates"][early.id]; ok {
		t.Errorf("an effect before the marker reached every gateway is a duplicate: %s", d)
	}
	for _, s := range []*slot{late, unseen, single} {
		if _, ok := bad["duplicates"][s.id]; !ok {
			t.Errorf("no duplicate reported for %s; found %v", s.id, bad)
		}
	}
	if w.redispatched[early.id][beforeMarkerReached] != 1 {
		t.Errorf("counted apart: %v; want 1 for %s", w.redispatched, early.id)
	}
}
