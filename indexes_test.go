package snapwriter

import (
	"bytes"
	"os"
	"testing"

	"github.com/snapwriter/snapwriter/internal/indexcount"
)

// The embedded configuration is the file the deploy script applies, and
// it parses with exemptions in it.
func TestIndexesEmbedded(t *testing.T) {
	b, err := os.ReadFile("firestore.indexes.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(Indexes(), b) {
		t.Error("Indexes() differs from firestore.indexes.json")
	}
	cfg, err := indexcount.Parse(Indexes())
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Exemptions()) == 0 {
		t.Error("no exemptions")
	}
}
