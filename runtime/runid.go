package runtime

import (
	"crypto/rand"
	"encoding/binary"
	"time"
)

// sortedAlphabet is base32 with its digits first, so that ids sort as
// strings in the order of the values they encode.
const sortedAlphabet = "234567ABCDEFGHIJKLMNOPQRSTUVWXYZ"

// NewRunID returns a new run id: 26 base32 characters (digits 2–7 and
// capital letters, as crypto/rand.Text), the first 10 encoding the
// Unix time in milliseconds of now and the other 16 encoding 80 random
// bits. Ids minted later sort after earlier ones (to the millisecond,
// by the wall clock), so that a store indexing runs by id inserts a
// batch of new runs next to each other rather than at random places
// in its index: fewer pages written per turn. The random part makes a
// collision as unlikely as for crypto/rand.Text within a millisecond.
//
// It is the Recorder's default RecorderConfig.NewID, with time.Now.
func NewRunID(now time.Time) string {
	var b [26]byte
	ms := uint64(max(now.UnixMilli(), 0))
	for i := 9; i >= 0; i-- {
		b[i] = sortedAlphabet[ms&31]
		ms >>= 5
	}
	var r [10]byte
	_, _ = rand.Read(r[:]) // crypto/rand.Read never fails
	hi, lo := binary.BigEndian.Uint64(r[:8]), uint64(binary.BigEndian.Uint16(r[8:]))
	// 80 bits: the 64 of hi then the 16 of lo, 5 at a time.
	for i := 25; i >= 10; i-- {
		b[i] = sortedAlphabet[lo&31]
		lo = lo>>5 | (hi&31)<<11
		hi >>= 5
	}
	return string(b[:])
}
