package redisstore

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
)

// chargeJSON is a vendor answer as vendors really send it: a Stripe-style
// charge object with its ids, timestamps, nested billing details and
// metadata, every value drawn from rng. About 1 KiB.
func chargeJSON(rng *rand.Rand) []byte {
	b, _ := json.Marshal(charge(rng))
	return b
}

// chargeList is a list object of n charges, as a list endpoint answers.
func chargeList(rng *rand.Rand, n int) []byte {
	data := make([]any, n)
	for i := range data {
		data[i] = charge(rng)
	}
	b, _ := json.Marshal(map[string]any{"object": "list", "url": "/v1/charges", "has_more": rng.IntN(2) == 0, "data": data})
	return b
}

const idChars = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

func randID(rng *rand.Rand, prefix string, n int) string {
	var b strings.Builder
	b.WriteString(prefix)
	for range n {
		b.WriteByte(idChars[rng.IntN(len(idChars))])
	}
	return b.String()
}

func charge(rng *rand.Rand) map[string]any {
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	created := 1_700_000_000 + rng.Int64N(60_000_000)
	amount := 100 + rng.IntN(500_000)
	first := pick("Jenny", "Ahmed", "Li", "Maria", "Oluwaseun", "Sven", "Priya", "Tomasz")
	last := pick("Rosen", "Haddad", "Wei", "Garcia", "Adeyemi", "Lindqvist", "Raman", "Nowak")
	city := pick("San Francisco", "Berlin", "Lagos", "São Paulo", "Mumbai", "Kraków", "Toronto")
	country := pick("US", "DE", "NG", "BR", "IN", "PL", "CA")
	pi := randID(rng, "pi_", 24)
	return map[string]any{
		"id":              randID(rng, "ch_", 24),
		"object":          "charge",
		"amount":          amount,
		"amount_captured": amount,
		"billing_details": map[string]any{
			"address": map[string]any{
				"city": city, "country": country, "line1": fmt.Sprintf("%d %s", 1+rng.IntN(9999), pick("Market St", "Hauptstraße 5", "Allen Ave", "Rua Augusta", "MG Road")),
				"line2": nil, "postal_code": fmt.Sprintf("%05d", rng.IntN(99999)), "state": pick("CA", "BE", "LA", "SP", "MH", "MA", "ON"),
			},
			"email": strings.ToLower(first+"."+last) + fmt.Sprintf("%d@example.com", rng.IntN(1000)),
			"name":  first + " " + last,
			"phone": fmt.Sprintf("+1%010d", rng.Int64N(10_000_000_000)),
		},
		"captured":    true,
		"created":     created,
		"currency":    pick("usd", "eur", "gbp", "brl", "inr"),
		"customer":    randID(rng, "cus_", 14),
		"description": fmt.Sprintf("Order #%d: %d items", rng.IntN(1_000_000), 1+rng.IntN(12)),
		"metadata": map[string]any{
			"order_id": fmt.Sprintf("ord_%08d", rng.IntN(100_000_000)), "cart_id": randID(rng, "", 16),
			"campaign": pick("spring_sale", "referral", "none", "black_friday"), "session": randID(rng, "sess_", 20),
		},
		"outcome": map[string]any{
			"network_status": "approved_by_network", "risk_level": pick("normal", "elevated"), "risk_score": rng.IntN(100),
		},
		"paid":           true,
		"payment_intent": pi,
		"payment_method": randID(rng, "pm_", 24),
		"payment_method_details": map[string]any{
			"card": map[string]any{
				"brand": pick("visa", "mastercard", "amex"), "exp_month": 1 + rng.IntN(12), "exp_year": 2027 + rng.IntN(6),
				"funding": pick("credit", "debit"), "last4": fmt.Sprintf("%04d", rng.IntN(10000)),
			},
			"type": "card",
		},
		"receipt_url": "https://pay.stripe.com/receipts/payment/" + randID(rng, "", 40),
		"refunded":    false,
		"status":      "succeeded",
	}
}
