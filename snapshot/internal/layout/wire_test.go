package layout

import (
	"fmt"
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
		docs = append(docs, DistrictDoc(snap, d, memData(d), "000000000000003"))
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
		got, err := WireSetWrite(name, doc)
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
		if _, err := WireSetWrite(name, bad); err == nil {
			t.Errorf("wireSetWrite(%v) = nil error", bad)
		}
	}
}

// The reference encoding WireSetWrite is held to: the Firestore API's
// protobuf messages, built as the Firestore client builds them for these
// types (int64 as integerValue, float64 as doubleValue, a nil list or map
// as null).

// protoValue encodes a canonical model value (nil, bool, string, int,
// int64, float64, []any, []string, map[string]any, recursively).
func protoValue(v any) (*pb.Value, error) {
	switch x := v.(type) {
	case nil:
		return nullValue(), nil
	case bool:
		return &pb.Value{ValueType: &pb.Value_BooleanValue{BooleanValue: x}}, nil
	case string:
		return stringValue(x), nil
	case int:
		return integerValue(int64(x)), nil
	case int64:
		return integerValue(x), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			// The model never holds them (JSON has none); refuse rather
			// than store a value the input could not have had.
			return nil, fmt.Errorf("cannot store the non-finite number %v", x)
		}
		return &pb.Value{ValueType: &pb.Value_DoubleValue{DoubleValue: x}}, nil
	case []any:
		if x == nil {
			return nullValue(), nil
		}
		vals := make([]*pb.Value, len(x))
		for i, e := range x {
			pv, err := protoValue(e)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			vals[i] = pv
		}
		return arrayValue(vals...), nil
	case []string:
		if x == nil {
			return nullValue(), nil
		}
		vals := make([]*pb.Value, len(x))
		for i, s := range x {
			vals[i] = stringValue(s)
		}
		return arrayValue(vals...), nil
	case map[string]any:
		if x == nil {
			return nullValue(), nil
		}
		fields, err := protoFields(x)
		if err != nil {
			return nil, err
		}
		return &pb.Value{ValueType: &pb.Value_MapValue{MapValue: &pb.MapValue{Fields: fields}}}, nil
	}
	return nil, fmt.Errorf("cannot store a value of type %T", v)
}

// protoFields encodes a document's (or a map's) fields.
func protoFields(m map[string]any) (map[string]*pb.Value, error) {
	fields := make(map[string]*pb.Value, len(m))
	for k, e := range m {
		pv, err := protoValue(e)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		fields[k] = pv
	}
	return fields, nil
}

func nullValue() *pb.Value { return &pb.Value{ValueType: &pb.Value_NullValue{}} }

func stringValue(s string) *pb.Value {
	return &pb.Value{ValueType: &pb.Value_StringValue{StringValue: s}}
}

func integerValue(n int64) *pb.Value {
	return &pb.Value{ValueType: &pb.Value_IntegerValue{IntegerValue: n}}
}

func arrayValue(vals ...*pb.Value) *pb.Value {
	return &pb.Value{ValueType: &pb.Value_ArrayValue{ArrayValue: &pb.ArrayValue{Values: vals}}}
}

// setWrite replaces document name with fields, as DocumentRef.Set does.
func setWrite(name string, fields map[string]*pb.Value) *pb.Write {
	return &pb.Write{Operation: &pb.Write_Update{Update: &pb.Document{Name: name, Fields: fields}}}
}
