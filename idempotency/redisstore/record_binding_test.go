package redisstore

import (
	"testing"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/effectspec"
)

// TestBindingLetters: every binding has its own record letter and reads
// back as itself; the in-process ones are i and k, meta is m (k and m are
// on the claim's redispatch allow-list with h and p), and a kind without a letter is
// refused rather than stored as another.
func TestBindingLetters(t *testing.T) {
	want := map[effectspec.BindingKind]string{
		effectspec.BindingHeader: "h", effectspec.BindingBodyPointer: "p", effectspec.BindingUnsupported: "u",
		effectspec.BindingInProcess: "i", effectspec.BindingInProcessKeyed: "k", effectspec.BindingMeta: "m",
	}
	for kind, letter := range want {
		c, ok := bindingCode(kind)
		if !ok || c != letter {
			t.Errorf("bindingCode(%s) = %q, %v; want %q", kind, c, ok, letter)
		}
		if back, ok := codeBinding(c); !ok || back != kind {
			t.Errorf("codeBinding(%q) = %s, %v; want %s", c, back, ok, kind)
		}
	}
	if _, ok := bindingCode("query"); ok {
		t.Error("an unknown binding got a letter")
	}
	if _, ok := codeBinding("q"); ok {
		t.Error("an unknown letter read as a binding")
	}
}

// TestLuaMetaByte: the final form's byte 1 that the scripts write for every
// state, key source and binding letter (meta_byte in lua/common.lua) reads
// back as the same field m through Lua (byte_meta) and Go (unpackFinal's
// finalBindings), on miniredis and a real Redis; the byte past the last
// letter is refused by both.
func TestLuaMetaByte(t *testing.T) {
	src := `
local mb = meta_byte(ARGV[1])
if mb == nil then
  return {-1, ''}
end
return {mb, byte_meta(mb) or '', byte_meta(4 * 6) or 'none'}
`
	onBothLuas(t, src, func(t *testing.T, exec func(args ...string) rueidis.RedisResult) {
		for _, s := range "ar" {
			for _, ks := range "sm" {
				for _, b := range finalBindings {
					m := string([]rune{s, ks, b})
					arr, err := exec(m).ToArray()
					if err != nil {
						t.Fatalf("%s: %v", m, err)
					}
					mb, _ := arr[0].AsInt64()
					back, _ := arr[1].ToString()
					beyond, _ := arr[2].ToString()
					if mb < 0 || back != m || beyond != "none" {
						t.Fatalf("%s: Lua writes %d, reads back %q, past the letters %q", m, mb, back, beyond)
					}
					flat, _, err := unpackFinal(string([]byte{finalForm, byte(mb), 0}))
					if err != nil || len(flat) < 2 || flat[1] != m {
						t.Fatalf("%s: Go reads byte %d as %q, %v", m, mb, flat, err)
					}
				}
			}
		}
		if _, _, err := unpackFinal(string([]byte{finalForm, 4 * byte(len(finalBindings)), 0})); err == nil {
			t.Fatal("Go reads a binding past the last letter")
		}
	})
}
