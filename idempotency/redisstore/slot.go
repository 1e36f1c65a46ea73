package redisstore

import (
	"strconv"
	"strings"
	"sync"
)

// clusterSlots is the number of Redis Cluster hash slots.
const clusterSlots = 16384

// keySlot returns the Redis Cluster slot of key: CRC16 of its hash tag (the
// bytes between the first '{' and the next '}', when not empty), or of the
// whole key, mod 16384. rueidis computes the same but does not export it.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key)) % clusterSlots
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial 0), the one Redis
// Cluster hashes keys with, a byte at a time without a table.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		x := byte(crc>>8) ^ s[i]
		x ^= x >> 4
		crc = crc<<8 ^ uint16(x)<<12 ^ uint16(x)<<5 ^ uint16(x)
	}
	return crc
}

// slotTags maps each slot to the shortest hash tag that hashes to it: the
// first base-36 number (in counting order) that does. A key "...{tag}"
// lives in that slot whatever else it holds. Built on first use (about 160k
// CRC16s of up to 4 bytes; BenchmarkSlotTags).
var slotTags = sync.OnceValue(buildSlotTags)

func buildSlotTags() *[clusterSlots]string {
	var tags [clusterSlots]string
	left := clusterSlots
	for n := int64(0); left > 0; n++ {
		t := strconv.FormatInt(n, 36)
		if s := crc16(t) % clusterSlots; tags[s] == "" {
			tags[s] = t
			left--
		}
	}
	return &tags
}
