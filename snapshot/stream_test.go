package snapshot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// getOutput is what `snapwriter get` printed of Get's result before
// WriteJSON: json.Encoder's encoding, indented or on one line.
func getOutput(t *testing.T, r *Reader, id string, indent bool) ([]byte, int) {
	t.Helper()
	s, err := r.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	if indent {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), len(s.Payload.Districts)
}

// TestWriteJSONIsGet: WriteJSON writes, byte for byte, what get printed of
// Get's result, indented and not, for a complete snapshot (in more than
// one batch, with characters json.Encoder escapes), a partial one whose
// failed chunk is absent, and one whose every district failed.
func TestWriteJSONIsGet(t *testing.T) {
	eachForm(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		complete := gen(132, 5)
		d := memData(complete.Payload.Districts[7])
		d["note <&>"] = "a <b> & c \u2028 é"
		d["whole"] = 3.0
		complete.Rankings = model.Object{"metadata": map[string]any{"rankingVersion": "v<2>"}, "x": []any{1.5, int64(2)}}
		mustWrite(t, e.writer(), day, complete)

		const partialDay, emptyDay = "2026-11-21", "2026-11-22"
		partial := model.Generate(partialDay, 120, 8)
		e.deny(layout.DistrictIDs(partial)[70])
		mustPartial(t)(e.writer().Write(ctx, partialDay, partial))
		e.f.setRule(func(c *commitCall) error {
			if len(c.districts) > 0 {
				return status.Error(codes.PermissionDenied, "injected")
			}
			return nil
		})
		mustPartial(t)(e.writer().Write(ctx, emptyDay, model.Generate(emptyDay, 30, 9)))
		e.f.setRule(nil)

		r := NewReader(e.clean, "")
		for _, id := range []string{day, partialDay, emptyDay} {
			for _, indent := range []bool{true, false} {
				want, wantN := getOutput(t, r, id, indent)
				var got bytes.Buffer
				n, _, err := r.WriteJSON(ctx, &got, id, indent)
				if err != nil {
					t.Fatalf("%s: WriteJSON: %v", id, err)
				}
				if n != wantN {
					t.Errorf("%s, indent %v: WriteJSON wrote %d districts, Get has %d", id, indent, n, wantN)
				}
				if !bytes.Equal(got.Bytes(), want) {
					i := 0
					for i < min(got.Len(), len(want)) && got.Bytes()[i] == want[i] {
						i++
					}
					t.Errorf("%s, indent %v: WriteJSON's %d bytes differ from get's %d at byte %d: …%q… want …%q…", id, indent,
						got.Len(), len(want), i, got.Bytes()[max(0, i-40):min(got.Len(), i+40)], want[max(0, i-40):min(len(want), i+40)])
				}
			}
		}
		// The state returned is the root's as the output was read.
		for id, want := range map[string]State{day: StateComplete, partialDay: StatePartial, emptyDay: StatePartial} {
			if _, asRead, err := r.WriteJSON(ctx, io.Discard, id, false); err != nil || asRead.State != want || asRead.SnapshotID != id {
				t.Errorf("%s: WriteJSON's summary %+v, %v; want state %s", id, asRead, err, want)
			}
		}
		if _, _, err := r.WriteJSON(ctx, &bytes.Buffer{}, "2026-01-01", true); !errors.Is(err, ErrNotFound) {
			t.Errorf("WriteJSON of a missing snapshot: %v, want ErrNotFound", err)
		}
	})
}
