package fstx

import pb "cloud.google.com/go/firestore/apiv1/firestorepb"

// Fields is a document read on the Firestore API as the Firestore
// client's DocumentSnapshot.Data gives it (createFromProtoValue), but for
// a reference, which is its name here: what the readers of a
// transaction's documents decode, whichever package began it.
func Fields(doc *pb.Document) map[string]any {
	m := make(map[string]any, len(doc.GetFields()))
	for k, v := range doc.GetFields() {
		m[k] = value(v)
	}
	return m
}

func value(v *pb.Value) any {
	switch x := v.GetValueType().(type) {
	case *pb.Value_BooleanValue:
		return x.BooleanValue
	case *pb.Value_IntegerValue:
		return x.IntegerValue
	case *pb.Value_DoubleValue:
		return x.DoubleValue
	case *pb.Value_TimestampValue:
		return x.TimestampValue.AsTime()
	case *pb.Value_StringValue:
		return x.StringValue
	case *pb.Value_BytesValue:
		return x.BytesValue
	case *pb.Value_ReferenceValue:
		return x.ReferenceValue
	case *pb.Value_GeoPointValue:
		return x.GeoPointValue
	case *pb.Value_ArrayValue:
		vals := x.ArrayValue.GetValues()
		list := make([]any, len(vals))
		for i, e := range vals {
			list[i] = value(e)
		}
		return list
	case *pb.Value_MapValue:
		m := make(map[string]any, len(x.MapValue.GetFields()))
		for k, e := range x.MapValue.GetFields() {
			m[k] = value(e)
		}
		return m
	}
	return nil
}
