package redisstore

import (
	"encoding/binary"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
)

// fieldOrder is the order of lua/common.lua.
const fieldOrder = "mwlnsyeqfkcpTMHPutaCUFoOxDRzJ"

// packRecord writes fields as a record string (schema 2), as the scripts
// do: numbers as big-endian bytes, headers without a code as
// ':'+"Name:value", the body last.
func packRecord(fields map[string]string) string {
	names := make([]string, 0, len(fields))
	for f := range fields {
		names = append(names, f)
	}
	// The scripts' order: the head CountRecords reads first, headers
	// then the body last.
	rank := func(f string) int {
		if f == "B" {
			return 1 << 10
		}
		if i := strings.Index(fieldOrder, f); len(f) == 1 && i >= 0 {
			return i
		}
		return 1 << 9
	}
	sort.Slice(names, func(i, j int) bool {
		if ri, rj := rank(names[i]), rank(names[j]); ri != rj {
			return ri < rj
		}
		return names[i] < names[j]
	})
	b := []byte{schemaVersion}
	for _, f := range names {
		v, tag := fields[f], f[0]
		switch {
		case strings.HasPrefix(f, ":"):
			v = f[1:] + ":" + v
		case strings.IndexByte(numericTags, tag) >= 0:
			x, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				panic(err)
			}
			var n []byte
			for ; x > 0; x >>= 8 {
				n = append([]byte{byte(x)}, n...)
			}
			v = string(n)
		}
		b = append(b, tag)
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	return string(b)
}

// recordFields reads the fields of a record key, of either schema.
func recordFields(t testing.TB, mr *miniredis.Miniredis, rk string) map[string]string {
	t.Helper()
	out := map[string]string{}
	if mr.Type(rk) == "hash" {
		fs, _ := mr.HKeys(rk)
		for _, f := range fs {
			out[f] = mr.HGet(rk, f)
		}
		return out
	}
	raw, err := mr.Get(rk)
	if err != nil {
		t.Fatalf("record %s: %v", rk, err)
	}
	flat, err := unpackRecord(raw)
	if err != nil {
		t.Fatalf("record %s: %v", rk, err)
	}
	for i := 0; i < len(flat); i += 2 {
		out[flat[i]] = flat[i+1]
	}
	return out
}

// editRecord rewrites a record string's fields, keeping its TTL.
func editRecord(t testing.TB, mr *miniredis.Miniredis, rk string, edit func(map[string]string)) {
	t.Helper()
	f := recordFields(t, mr, rk)
	edit(f)
	ttl := mr.TTL(rk)
	if err := mr.Set(rk, packRecord(f)); err != nil {
		t.Fatal(err)
	}
	if ttl > 0 {
		mr.SetTTL(rk, ttl)
	}
}
