package idempotency

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

func TestVendorKeyDerivation(t *testing.T) {
	const dep = "00112233445566778899aabbccddeeff"
	key, _ := ParseKey("idt_00000000000000000000000000000001")
	rh := "sha256:" + hex.EncodeToString(make([]byte, 32))
	scope := Scope{Workspace: "ws_acme", Connection: "conn_pay", Tool: "payments.create_charge"}

	// The derivation of docs/DESIGN.md, "The key on the vendor hop", written
	// out byte by byte.
	input := "obol/vendor-key/v2\x00" + dep + "\x00ws_acme\x00conn_pay\x00" + toolHash("payments.create_charge") +
		"\x00idt_00000000000000000000000000000001\x00" + rh
	sum := sha256.Sum256([]byte(input))
	want := "idt_" + hex.EncodeToString(sum[:16])
	got := VendorKey(dep, scope, key, rh)
	if got.String() != want {
		t.Fatalf("VendorKey = %s, want %s", got, want)
	}
	if _, err := ParseKey(got.String()); err != nil {
		t.Fatalf("vendor key is not a key: %v", err)
	}

	// Every input moves the key; a capability is scoped as unresolved.
	other, _ := ParseKey("idt_00000000000000000000000000000002")
	variants := map[string]Key{
		"deployment":   VendorKey("ffeeddccbbaa99887766554433221100", scope, key, rh),
		"workspace":    VendorKey(dep, Scope{Workspace: "ws_globex", Connection: "conn_pay", Tool: scope.Tool}, key, rh),
		"connection":   VendorKey(dep, Scope{Workspace: "ws_acme", Connection: "conn_other", Tool: scope.Tool}, key, rh),
		"tool":         VendorKey(dep, Scope{Workspace: "ws_acme", Connection: "conn_pay", Tool: "payments.refund"}, key, rh),
		"key":          VendorKey(dep, scope, other, rh),
		"request hash": VendorKey(dep, scope, key, "sha256:"+hex.EncodeToString(sum[:])),
	}
	seen := map[Key]string{got: "base"}
	for name, k := range variants {
		if prev, dup := seen[k]; dup {
			t.Fatalf("changing the %s gives the same vendor key as %s", name, prev)
		}
		seen[k] = name
	}
	capA := VendorKey(dep, Scope{Workspace: "ws_acme", Connection: "conn_a", Tool: "cap.send_email"}, key, rh)
	capB := VendorKey(dep, Scope{Workspace: "ws_acme", Tool: "cap.send_email"}, key, rh)
	if capA != capB {
		t.Fatal("a capability's vendor key depends on a connection; its scope is unresolved")
	}
}

func TestDeploymentID(t *testing.T) {
	a, b := NewDeploymentID(), NewDeploymentID()
	if !validDeploymentID(a) || a == b {
		t.Fatalf("deployment ids %q, %q: want two distinct 32-hex ids", a, b)
	}
	for _, bad := range []string{"", "idt_" + a, a[:31], a + "0", "0123456789ABCDEF0123456789abcdef"} {
		if validDeploymentID(bad) {
			t.Fatalf("ValidDeploymentID(%q) = true", bad)
		}
	}
}

// VendorKeys derives what the one-call derivation did: SHA-256 over the
// parts joined by zero bytes, written part by part; Raw is Key's bytes.
func TestVendorKeysDerivation(t *testing.T) {
	reference := func(deployment string, scope Scope, key Key, requestHash string) string {
		conn := scope.Connection
		if scope.isCapability() {
			conn = Unresolved
		}
		h := sha256.New()
		for i, part := range []string{"obol/vendor-key/v2", deployment, scope.Workspace, conn, toolHash(scope.Tool), key.String(), requestHash} {
			if i > 0 {
				h.Write([]byte{0})
			}
			h.Write([]byte(part))
		}
		return "idt_" + hex.EncodeToString(h.Sum(nil)[:16])
	}
	key, _ := ParseKey("idt_00000000000000000000000000000001")
	long := strings.Repeat("w", 300) // past the stack buffer
	for _, sc := range []Scope{
		{Workspace: "ws_a", Connection: "conn_pay", Tool: "pay.charge"},
		{Workspace: "ws_b", Connection: "conn_pay", Tool: "pay.charge"},
		{Workspace: "ws_a", Tool: "cap.send_email"},
		{Workspace: long, Connection: "conn_pay", Tool: "pay.charge"},
	} {
		vk := NewVendorKeys("0123456789abcdef0123456789abcdef", sc)
		got := vk.Key(key, "sha256:ab")
		if want := reference("0123456789abcdef0123456789abcdef", sc, key, "sha256:ab"); got.String() != want {
			t.Errorf("%+v: %s, want %s", sc, got, want)
		}
		if raw := vk.Raw(key, "sha256:ab"); "idt_"+hex.EncodeToString(raw[:]) != got.String() {
			t.Errorf("%+v: Raw %x, Key %s", sc, raw, got)
		}
	}
}
