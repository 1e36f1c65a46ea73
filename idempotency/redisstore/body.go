package redisstore

import (
	"bytes"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/flate"
)

// Stored bodies above compressAbove bytes are compressed with DEFLATE
// (RFC 1951, klauspost/compress level 7) and the preset dictionary jsonDict
// when that makes them smaller; the record keeps the size before
// compression (field z), so a replay returns the exact bytes and decoding
// never makes more than that. Most stored answers are small, where raw
// DEFLATE (no frame to pay for) with the dictionary beats zstd, brotli and
// s2; level 7 is where a higher level stops gaining (README.md,
// Measurements). Below statelessBelow a body is compressed without
// compressor state: the same format, a few bytes larger, and no reset of
// the level-7 writer's tables, which cost a small body more than the rest.
//
// A body compressed with the dictionary starts with dictMarker, a byte that
// never starts a DEFLATE stream (its block type would be 3, reserved by RFC
// 1951 section 3.2.3), so bodies compressed before the dictionary (plain
// DEFLATE from the first byte) still read as they are.
const (
	compressAbove = 128
	// maxBodyBytes bounds a body before compression, and so what decoding
	// a stored body may allocate, whatever a record says. MaxResultBytes
	// is at most this.
	maxBodyBytes = 64 << 20
	flateLevel   = 7
	// statelessBelow: a body shorter than this is compressed without
	// state (flate.StatelessDeflate, the same format and dictionary),
	// a few bytes larger; at 1 KiB the stateless stream is 6% larger and
	// a record 125 B larger in used_memory (README.md, Measurements).
	statelessBelow = 512
	dictMarker     = 0xfe // block type bits (1-2) are 11: no DEFLATE stream starts so
)

// flateWriters and flateReaders keep compressor state (hundreds of KiB for
// a writer, the dictionary's window included) across calls.
var (
	flateWriters = sync.Pool{New: func() any {
		w, err := flate.NewWriterDict(nil, flateLevel, jsonDict)
		if err != nil {
			panic("redisstore: flate level: " + err.Error()) // a constant
		}
		return w
	}}
	flateReaders = sync.Pool{New: func() any { return flate.NewReader(nil) }}
)

// compressBody returns what a record stores of body, and the body's size
// when that is compressed (0: stored as it is).
func compressBody(body []byte) ([]byte, int) {
	if len(body) <= compressAbove {
		return body, 0
	}
	var buf bytes.Buffer
	buf.Grow(len(body) * 3 / 4)
	buf.WriteByte(dictMarker)
	var err error // a bytes.Buffer does not fail; if it did, store it as it is
	if len(body) < statelessBelow {
		// No compressor state: a pooled level-7 writer clears its hash
		// tables (hundreds of KiB) on every Reset, most of what a small
		// body costs (row 7's profile: compressBody 7.5% of refserver's
		// CPU, 3.9% stateless).
		err = flate.StatelessDeflate(&buf, body, true, jsonDict)
	} else {
		w := flateWriters.Get().(*flate.Writer)
		w.Reset(&buf) // keeps the dictionary
		if _, err = w.Write(body); err == nil {
			err = w.Close()
		}
		flateWriters.Put(w)
	}
	if err != nil || buf.Len() >= len(body) {
		return body, 0
	}
	return buf.Bytes(), len(body)
}

// decompressBody reverses compressBody. It allocates size bytes (and
// refuses a size over maxBodyBytes) and reads no more than that, whatever
// the stored bytes say.
func decompressBody(stored []byte, size int) ([]byte, error) {
	if size <= 0 || size > maxBodyBytes {
		return nil, fmt.Errorf("body size %d out of range", size)
	}
	var dict []byte
	if len(stored) > 0 && stored[0]>>1&3 == 3 { // not a DEFLATE stream's first byte: a marker
		if stored[0] != dictMarker {
			return nil, fmt.Errorf("compressed body: unknown format 0x%02x", stored[0])
		}
		stored, dict = stored[1:], jsonDict
	}
	r := flateReaders.Get().(io.ReadCloser)
	defer flateReaders.Put(r)
	if err := r.(flate.Resetter).Reset(bytes.NewReader(stored), dict); err != nil {
		return nil, fmt.Errorf("compressed body: %w", err)
	}
	out := make([]byte, size)
	if _, err := io.ReadFull(r, out); err != nil {
		return nil, fmt.Errorf("compressed body: %d bytes wanted: %w", size, err)
	}
	// The stream must end exactly there.
	if n, err := r.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		return nil, fmt.Errorf("compressed body: longer than the %d bytes the record says", size)
	}
	return out, nil
}
