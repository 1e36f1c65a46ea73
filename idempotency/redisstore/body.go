package redisstore

import (
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// Stored bodies above compressAbove bytes are compressed with zstd when that
// makes them smaller; the record keeps the size before compression (field
// z), so a replay returns the exact bytes and decoding never makes more
// than that. zstd because, on vendor JSON (ids, timestamps, nested
// objects), it stores a 64 KiB answer 10% smaller than flate and 25% smaller
// than s2, and a 1 KiB one within 5% of flate, at the speed of flate's
// fastest level; one Encoder and one Decoder serve every goroutine.
const (
	compressAbove = 128
	// maxBodyBytes bounds a body before compression, and so what decoding
	// a stored body may allocate, whatever a record says. MaxResultBytes
	// is at most this.
	maxBodyBytes = 64 << 20
)

var zstdCodec = sync.OnceValues(func() (*zstd.Encoder, *zstd.Decoder) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1),
		zstd.WithLowerEncoderMem(true))
	if err != nil {
		panic("redisstore: zstd encoder: " + err.Error()) // only for invalid options
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecodeAllCapLimit(true),
		zstd.WithDecoderMaxMemory(maxBodyBytes))
	if err != nil {
		panic("redisstore: zstd decoder: " + err.Error())
	}
	return enc, dec
})

// compressBody returns what a record stores of body, and the body's size
// when that is compressed (0: stored as it is).
func compressBody(body []byte) ([]byte, int) {
	if len(body) <= compressAbove {
		return body, 0
	}
	enc, _ := zstdCodec()
	c := enc.EncodeAll(body, make([]byte, 0, len(body)/2))
	if len(c) >= len(body) {
		return body, 0
	}
	return c, len(body)
}

// decompressBody reverses compressBody. It allocates size bytes at most
// (and refuses a size over maxBodyBytes), whatever the stored bytes say.
func decompressBody(stored []byte, size int) ([]byte, error) {
	if size <= 0 || size > maxBodyBytes {
		return nil, fmt.Errorf("body size %d out of range", size)
	}
	var h zstd.Header
	if err := h.Decode(stored); err != nil {
		return nil, fmt.Errorf("compressed body: %w", err)
	}
	if !h.HasFCS || h.FrameContentSize != uint64(size) {
		return nil, fmt.Errorf("compressed body: frame of %d bytes, record says %d", h.FrameContentSize, size)
	}
	_, dec := zstdCodec()
	out, err := dec.DecodeAll(stored, make([]byte, 0, size))
	if err != nil {
		return nil, fmt.Errorf("compressed body: %w", err)
	}
	if len(out) != size {
		return nil, fmt.Errorf("compressed body: %d bytes, record says %d", len(out), size)
	}
	return out, nil
}
