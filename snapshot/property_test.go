package snapshot

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/snapwriter/snapwriter/model"
)

// jsonValue draws a JSON value in the canonical forms the model decodes to,
// of the shapes Firestore stores: an array never directly holds an array
// (model.Validate refuses those).
func jsonValue(depth int) *rapid.Generator[any] { return storable(depth, false) }

func storable(depth int, inArray bool) *rapid.Generator[any] {
	return rapid.Custom(func(t *rapid.T) any {
		kinds := 6
		if depth > 0 {
			kinds = 8
		}
		kind := rapid.IntRange(0, kinds-1).Draw(t, "kind")
		if kind == 6 && inArray {
			kind = 7
		}
		switch kind {
		case 0:
			return nil
		case 1:
			return rapid.Bool().Draw(t, "bool")
		case 2:
			return rapid.String().Draw(t, "string")
		case 3:
			return rapid.Int64().Draw(t, "int")
		case 4:
			f := rapid.Float64().Draw(t, "float")
			if math.IsNaN(f) || math.IsInf(f, 0) || f == math.Trunc(f) {
				return 0.5
			}
			return f
		case 5:
			return rapid.SampledFrom([]string{"Mem. Base", "% Club Growth", "Club Name", ""}).Draw(t, "column")
		case 6:
			return rapid.SliceOfN(storable(depth-1, true), 0, 4).Draw(t, "array")
		default:
			m := map[string]any{}
			for i, n := 0, rapid.IntRange(0, 4).Draw(t, "n"); i < n; i++ {
				m[rapid.StringMatching(`[A-Za-z %.]{1,12}`).Draw(t, "key")] = jsonValue(depth-1).Draw(t, "v")
			}
			return m
		}
	})
}

// Property 9 (spec: PBT, ≥100 iterations): any valid snapshot of 1–200
// districts, with unknown fields anywhere, reads back equal to what was
// written.
func TestPropertyWriteReadEquivalence(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.writer(WithConcurrency(4))
	r := NewReader(e.clean, "")
	base := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	iteration := 0
	rapid.Check(t, func(rt *rapid.T) {
		iteration++
		id := base.AddDate(0, 0, iteration).Format("2006-01-02")
		n := rapid.IntRange(1, 200).Draw(rt, "districts")
		s := model.Generate(id, n, rapid.Int64().Draw(rt, "seed"))
		extra := func(label string) model.Object {
			o := model.Object{}
			for i, k := 0, rapid.IntRange(0, 3).Draw(rt, label); i < k; i++ {
				o[fmt.Sprintf("x-%s-%d %%", label, i)] = jsonValue(2).Draw(rt, label+"v")
			}
			return o
		}
		for k, v := range extra("top") {
			if s.Extra == nil {
				s.Extra = model.Object{}
			}
			s.Extra[k] = v
		}
		for k, v := range extra("meta") {
			if s.Payload.Metadata.Extra == nil {
				s.Payload.Metadata.Extra = model.Object{}
			}
			s.Payload.Metadata.Extra[k] = v
		}
		d := &s.Payload.Districts[rapid.IntRange(0, n-1).Draw(rt, "which")]
		for k, v := range extra("district") {
			memData(*d)[k] = v
		}
		if rapid.Bool().Draw(rt, "dropRankings") {
			s.Rankings = nil
		}
		if err := model.Validate(s, id); err != nil {
			rt.Fatalf("generated snapshot invalid: %v", err)
		}
		res, err := w.Write(context.Background(), id, s)
		if err != nil || res.Outcome != OutcomeComplete {
			rt.Fatalf("write: %v %+v", err, res)
		}
		got, err := r.Get(context.Background(), id)
		if err != nil {
			rt.Fatal(err)
		}
		if !model.Equal(got, s) {
			rt.Fatalf("read back differs: %s", model.Diff(got, s))
		}
	})
}
