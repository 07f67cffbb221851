package snapshot

import (
	"math"
	"strings"
	"testing"

	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/protobuf/proto"

	"github.com/snapwriter/snapwriter/model"
)

// TestWireFieldsAreProtoFields: a set whose fields are carried in their
// wire form sends, byte for byte once parsed, the document protoFields
// builds — what the Firestore client would send.
func TestWireFieldsAreProtoFields(t *testing.T) {
	const name = "projects/p/databases/(default)/documents/snapshots/2026-11-20/districts/district_1"
	snap := model.Generate(day, 5, 11)
	var docs []map[string]any
	for _, d := range snap.Payload.Districts {
		docs = append(docs, districtDoc(snap, d, memData(d), "000000000000003"))
	}
	docs = append(docs, map[string]any{
		"nil": nil, "t": true, "f": false, "empty": "", "é – 😀": "\u2028\x00",
		"zero": int64(0), "neg": int64(math.MinInt64), "int": 7, "max": int64(math.MaxInt64),
		"f0": 0.0, "fneg0": math.Copysign(0, -1), "fbig": 1e300, "ftiny": 5e-324, "fneg": -2.5,
		"nilList": []any(nil), "emptyList": []any{}, "nilMap": map[string]any(nil), "emptyMap": map[string]any{},
		"strs": []string{"a", ""}, "nilStrs": []string(nil),
		"deep": map[string]any{"a": []any{map[string]any{"b": []any{int64(1), "x", nil, []string{"y"}}}, strings.Repeat("z", 300)}},
	}, map[string]any{})
	for i, doc := range docs {
		got, err := wireSetWrite(name, doc)
		if err != nil {
			t.Fatalf("doc %d: %v", i, err)
		}
		fields, err := protoFields(doc)
		if err != nil {
			t.Fatalf("doc %d: protoFields: %v", i, err)
		}
		want := setWrite(name, fields)
		b, err := proto.Marshal(got)
		if err != nil {
			t.Fatalf("doc %d: %v", i, err)
		}
		if proto.Size(got) != len(b) {
			t.Errorf("doc %d: proto.Size %d, marshalled %d bytes", i, proto.Size(got), len(b))
		}
		parsed := new(pb.Write)
		if err := proto.Unmarshal(b, parsed); err != nil {
			t.Fatalf("doc %d: %v", i, err)
		}
		if len(parsed.GetUpdate().ProtoReflect().GetUnknown()) != 0 {
			t.Errorf("doc %d: fields parsed back as unknown fields", i)
		}
		if !proto.Equal(parsed, want) {
			t.Errorf("doc %d: the wire form parses to\n%v\nwant\n%v", i, parsed, want)
		}
	}
	for _, bad := range []map[string]any{{"nan": math.NaN()}, {"a": []any{math.Inf(-1)}}, {"f": func() {}}} {
		if _, err := wireSetWrite(name, bad); err == nil {
			t.Errorf("wireSetWrite(%v) = nil error", bad)
		}
	}
}
