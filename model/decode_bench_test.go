package model

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkLoad5000 decodes (and validates) a generated 5,000-district
// snapshot of about 54 MB, as write does before it touches Firestore.
func BenchmarkLoad5000(b *testing.B) {
	data, err := Marshal(Generate("2026-11-20", 5000, 1))
	if err != nil {
		b.Fatal(err)
	}
	for _, validate := range []bool{false, true} {
		name := "decode"
		if validate {
			name = "decode+validate"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				s, err := Decode(bytes.NewReader(data))
				if err != nil {
					b.Fatal(err)
				}
				if validate {
					if err := Validate(s, "2026-11-20"); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
	// Open reads the same bytes from a file, leaving the districts' data
	// in it: one streaming pass that also hashes every district.
	path := filepath.Join(b.TempDir(), "in.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.Fatal(err)
	}
	b.Run("open+validate", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			s, err := Open(path)
			if err != nil {
				b.Fatal(err)
			}
			if err := Validate(s, "2026-11-20"); err != nil {
				b.Fatal(err)
			}
			s.Close()
		}
	})
}
