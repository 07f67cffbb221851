package snapshot

import (
	"bytes"
	"io"

	"github.com/snapwriter/snapwriter/model"
)

// encodedSize is an upper bound on a value's size inside a Commit request
// (model.EncodedSize): chunks must never exceed the 10 MiB request limit.
func encodedSize(v any) int { return model.EncodedSize(v) }

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
