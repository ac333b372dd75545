// Package keyrange computes the key range of the strings that begin with
// a prefix, for a range scan of an index (key >= prefix AND key < end,
// comparing bytes).
package keyrange

import "unicode/utf8"

// End returns the end of the key range of the strings that begin with
// prefix, in byte order (for UTF-8, code point order): they are exactly
// the strings s with prefix <= s < end. For valid UTF-8, end is prefix
// with its last code point below U+10FFFF incremented (past the
// surrogates) and the code points after it dropped: valid UTF-8 too, so
// that a store compares it with a text column. For other bytes, it is
// prefix with its last byte below 0xff incremented and the bytes after
// it dropped. ok is false when the range has no end (prefix is empty,
// all U+10FFFF, or all 0xff bytes): every s >= prefix begins with it.
func End(prefix string) (end string, ok bool) {
	if !utf8.ValidString(prefix) {
		for i := len(prefix) - 1; i >= 0; i-- {
			if prefix[i] != 0xff {
				return prefix[:i] + string([]byte{prefix[i] + 1}), true
			}
		}
		return "", false
	}
	for prefix != "" {
		r, size := utf8.DecodeLastRuneInString(prefix)
		prefix = prefix[:len(prefix)-size]
		switch r {
		case utf8.MaxRune:
			continue
		case 0xD7FF:
			r = 0xE000 // past the surrogates, which UTF-8 never encodes
		default:
			r++
		}
		return prefix + string(r), true
	}
	return "", false
}
