package snapshot

import (
	"fmt"
	"math"

	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
)

// The encoders below turn the writer's documents into the Firestore API's
// protobuf values directly. The Firestore client does the same by
// reflection on every call, and does it again on every retry; a chunk's
// documents are encoded here once and its commit is retried with the same
// messages. They produce what the client would for these types — int64
// as integerValue, float64 as doubleValue, a nil list or map as null — so
// documents read back the same whichever path wrote them.

// protoValue encodes a canonical model value (nil, bool, string, int,
// int64, float64, []any, []string, map[string]any, recursively). District
// documents are sent in the wire form (wireSetWrite), which must encode
// exactly what protoValue does.
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

// deleteWrite deletes document name (nothing happens when it is missing).
func deleteWrite(name string) *pb.Write {
	return &pb.Write{Operation: &pb.Write_Delete{Delete: name}}
}
