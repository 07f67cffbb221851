package snapshot

import (
	"bytes"
	"io"
)

// encodedSize is an upper bound on a value's size inside a Commit request.
// Firestore's storage size undercounts the protobuf framing of small fields
// (tags, lengths, map entries), so each element is charged a generous fixed
// overhead: chunks must never exceed the 10 MiB request limit.
func encodedSize(v any) int {
	switch x := v.(type) {
	case string:
		return len(x) + 8
	case []any:
		n := 8
		for _, e := range x {
			n += encodedSize(e) + 4
		}
		return n
	case map[string]any:
		n := 8
		for k, e := range x {
			n += len(k) + encodedSize(e) + 12
		}
		return n
	default: // numbers, bools, null
		return 12
	}
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
