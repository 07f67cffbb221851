package indexcount

import (
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// encodeMap converts a document's fields as the Go client reads them back
// into the wire form Firestore indexes. Only the types Data returns for
// the values snapwriter writes are accepted (not geo points or vectors):
// counting must not guess at a value it cannot place.
func encodeMap(m map[string]any) (map[string]*pb.Value, error) {
	out := make(map[string]*pb.Value, len(m))
	for k, v := range m {
		e, err := encode(v)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", k, err)
		}
		out[k] = e
	}
	return out, nil
}

func encode(v any) (*pb.Value, error) {
	switch x := v.(type) {
	case nil:
		return &pb.Value{ValueType: &pb.Value_NullValue{NullValue: structpb.NullValue_NULL_VALUE}}, nil
	case bool:
		return &pb.Value{ValueType: &pb.Value_BooleanValue{BooleanValue: x}}, nil
	case int64:
		return &pb.Value{ValueType: &pb.Value_IntegerValue{IntegerValue: x}}, nil
	case int:
		return &pb.Value{ValueType: &pb.Value_IntegerValue{IntegerValue: int64(x)}}, nil
	case float64:
		return &pb.Value{ValueType: &pb.Value_DoubleValue{DoubleValue: x}}, nil
	case string:
		return &pb.Value{ValueType: &pb.Value_StringValue{StringValue: x}}, nil
	case []byte:
		return &pb.Value{ValueType: &pb.Value_BytesValue{BytesValue: x}}, nil
	case time.Time:
		return &pb.Value{ValueType: &pb.Value_TimestampValue{TimestampValue: timestamppb.New(x)}}, nil
	case *firestore.DocumentRef:
		return &pb.Value{ValueType: &pb.Value_ReferenceValue{ReferenceValue: x.Path}}, nil
	case []any:
		vs := make([]*pb.Value, len(x))
		for i, e := range x {
			ev, err := encode(e)
			if err != nil {
				return nil, fmt.Errorf("element %d: %w", i, err)
			}
			vs[i] = ev
		}
		return &pb.Value{ValueType: &pb.Value_ArrayValue{ArrayValue: &pb.ArrayValue{Values: vs}}}, nil
	case map[string]any:
		fields, err := encodeMap(x)
		if err != nil {
			return nil, err
		}
		return &pb.Value{ValueType: &pb.Value_MapValue{MapValue: &pb.MapValue{Fields: fields}}}, nil
	default:
		return nil, fmt.Errorf("value of type %T: not one the Firestore client reads back", v)
	}
}
