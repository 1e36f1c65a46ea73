package redisstore

import (
	"encoding/binary"
	"strconv"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/internal/redistest"
)

// TestLuaCodecAtBoundaries runs the scripts' number and length writers
// (lua/common.lua) and reader on values at every byte boundary, against
// Go's reading of a record (unpack), on miniredis and on a real Redis: the
// two Lua interpreters differ in number formatting, and a number written a
// byte short would read as another number.
func TestLuaCodecAtBoundaries(t *testing.T) {
	// The script writes a record of one numeric field (n) and one string
	// field (q) of ARGV[2] bytes, then reads it back with decode.
	src := `
local r = {n = ARGV[1], q = string.rep('a', tonumber(ARGV[2]))}
local s = encode(r, true)
local back = decode(s)
return {s, back.n, #back.q}
`
	var values []uint64
	for b := 0; b <= 52; b++ {
		v := uint64(1) << b
		values = append(values, v-1, v, v+1)
	}
	values = append(values, 1<<53-1, 1796065957914)
	lengths := []int{0, 1, 127, 128, 129, 16383, 16384, 16385}

	onBothLuas(t, src, func(t *testing.T, exec func(args ...string) rueidis.RedisResult) {
		for i, v := range values {
			n := lengths[i%len(lengths)]
			arr, err := exec(strconv.FormatUint(v, 10), strconv.Itoa(n)).ToArray()
			if err != nil {
				t.Fatalf("%d: %v", v, err)
			}
			raw, _ := arr[0].ToString()
			back, _ := arr[1].ToString()
			blen, _ := arr[2].AsInt64()
			var want []byte
			for x := v; x > 0; x >>= 8 {
				want = append([]byte{byte(x)}, want...)
			}
			head := []byte{schemaVersion, 'n'}
			head = binary.AppendUvarint(head, uint64(len(want)))
			head = append(head, want...)
			head = append(head, 'q')
			head = binary.AppendUvarint(head, uint64(n))
			if raw[:min(len(raw), len(head))] != string(head) || len(raw) != len(head)+n {
				t.Fatalf("%d with a %d-byte field: wrote %q..., want %q...", v, n, raw[:min(len(raw), len(head)+4)], head)
			}
			flat, cut, err := unpack(raw)
			if err != nil || cut || len(flat) != 4 || flat[1] != strconv.FormatUint(v, 10) || len(flat[3]) != n {
				t.Fatalf("%d: Go reads %q (cut %v, err %v)", v, flat, cut, err)
			}
			if back != strconv.FormatUint(v, 10) || int(blen) != n {
				t.Fatalf("%d: Lua reads back %q and a %d-byte field", v, back, blen)
			}
		}
	})
}

// TestLuaFinalFormNumbers: the final form's numbers (LEB128) written by
// the scripts read back through Lua and Go as written, at every 7-bit
// boundary up to 2^53, on miniredis and a real Redis.
func TestLuaFinalFormNumbers(t *testing.T) {
	src := `
local v = ARGV[1]
local r = {m = 'amk', w = v, q = string.rep('q', 32), f = string.rep('f', 32), o = 'oooooooo', n = v, C = v, F = v,
  x = '201', z = v, B = '\254body', H = 'h', P = '/p', M = 'POST'}
local s = encode(r, true)
local back = decode(s)
return {s, back.w, back.n, back.C, back.F, back.z, back.B, back.M}
`
	var values []uint64
	for b := 0; b <= 53; b += 7 {
		v := uint64(1) << b
		values = append(values, v-1, v, v+1)
	}
	values = append(values, 1<<53-1, 1796065957914)
	onBothLuas(t, src, func(t *testing.T, exec func(args ...string) rueidis.RedisResult) {
		for _, v := range values {
			arr, err := exec(strconv.FormatUint(v, 10)).AsStrSlice()
			if err != nil {
				t.Fatalf("%d: %v", v, err)
			}
			want := strconv.FormatUint(v, 10)
			for i, got := range arr[1:6] {
				if got != want {
					t.Fatalf("%d: Lua reads back number %d as %q", v, i, got)
				}
			}
			if arr[6] != "\xfebody" || arr[7] != "POST" || arr[0][0] != finalForm {
				t.Fatalf("%d: Lua reads back body %q, method %q from %q", v, arr[6], arr[7], arr[0])
			}
			f, err := storedFields(arr[0])
			if err != nil || f["w"] != want || f["n"] != want || f["C"] != want || f["F"] != want || f["z"] != want ||
				f["B"] != "\xfebody" || f["x"] != "201" || f["M"] != "POST" || f["m"] != "amk" || f["H"] != "h" || f["P"] != "/p" {
				t.Fatalf("%d: Go reads %q, %v", v, f, err)
			}
		}
	})
}

// onBothLuas runs script, lua/common.lua followed by body, through run on
// miniredis and on a real Redis: their Lua interpreters differ in number
// formatting.
func onBothLuas(t *testing.T, body string, run func(t *testing.T, exec func(args ...string) rueidis.RedisResult)) {
	t.Helper()
	common, err := luaFS.ReadFile("lua/common.lua")
	if err != nil {
		t.Fatal(err)
	}
	script := rueidis.NewLuaScript(string(common) + body)
	mr := miniredis.RunT(t)
	srv := redistest.Start(t)
	for name, addr := range map[string]string{"miniredis": mr.Addr(), "redis": srv.Addr()} {
		t.Run(name, func(t *testing.T) {
			c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			run(t, func(args ...string) rueidis.RedisResult { return script.Exec(t.Context(), c, []string{"k"}, args) })
		})
	}
}
