package layout

import (
	"bytes"
	"fmt"
	"math"
	"strings"

	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/snapwriter/snapwriter/internal/fstx"
)

// A chunk holds its documents encoded from when it is built until its
// commit succeeds or gives up, across its retries. As protobuf message
// trees a district of 11 KB of JSON takes about 67 KB, so
// 16 chunks in flight held 55 MB, and the heap twice that: a
// concurrency-16 write took 4.4 times its input. The same fields in
// protobuf's wire form take about what the JSON does. WireSetWrite
// therefore encodes a document's fields to the wire form once, and carries
// them in the Document message as unknown fields, which protobuf-go keeps
// and writes out verbatim, after the known ones (the name): the request
// on the wire is a valid Document with these fields, as Firestore reads
// it, while the process holds a few bytes per value instead of a message
// tree. The encoding is the Firestore client's, value for value: the
// test's reference encoder (protoValue, in wire_test.go) builds the
// client's messages, and TestWireFieldsAreProtoFields holds this one to it.

// Field numbers of google.firestore.v1 messages (document.proto).
const (
	documentFields protowire.Number = 2 // Document.fields: map<string, Value>
	mapEntryKey    protowire.Number = 1 // map entries' key
	mapEntryValue  protowire.Number = 2 // map entries' value
	mapValueFields protowire.Number = 1 // MapValue.fields: map<string, Value>
	arrayValues    protowire.Number = 1 // ArrayValue.values: repeated Value

	valueBoolean protowire.Number = 1
	valueInteger protowire.Number = 2
	valueDouble  protowire.Number = 3
	valueMap     protowire.Number = 6
	valueArray   protowire.Number = 9
	valueNull    protowire.Number = 11
	valueString  protowire.Number = 17
)

// WireSetWrite is the Write that replaces document name with doc's fields,
// as DocumentRef.Set sends it, with the fields kept in their wire form (see
// above).
func WireSetWrite(name string, doc map[string]any) (*pb.Write, error) {
	fields, err := appendWireFields(nil, documentFields, doc)
	if err != nil {
		return nil, err
	}
	d := &pb.Document{Name: name}
	// Cloned to its length: appending left up to twice its size behind,
	// held as long as the chunk is.
	d.ProtoReflect().SetUnknown(protoreflect.RawFields(bytes.Clone(fields)))
	return &pb.Write{Operation: &pb.Write_Update{Update: d}}, nil
}

// DeleteWrite deletes document name (nothing happens when it is missing).
// Only a district document's set is sent in the wire form above; every
// other document goes through the Firestore client.
func DeleteWrite(name string) *pb.Write {
	return &pb.Write{Operation: &pb.Write_Delete{Delete: name}}
}

// appendWireFields appends m's entries as the map field num of a message.
func appendWireFields(dst []byte, num protowire.Number, m map[string]any) ([]byte, error) {
	for k, v := range m {
		dst = beginNested(dst, num)
		entry := len(dst)
		dst = protowire.AppendTag(dst, mapEntryKey, protowire.BytesType)
		dst = protowire.AppendString(dst, k)
		dst = beginNested(dst, mapEntryValue)
		val := len(dst)
		var err error
		if dst, err = appendWireValue(dst, v); err != nil {
			return dst, fmt.Errorf("%s: %w", k, err)
		}
		dst = endNested(endNested(dst, val), entry)
	}
	return dst, nil
}

// appendWireValue appends the fields of the Value message that encodes v
// (a canonical model value: nil, bool, string, int, int64, float64, []any,
// []string, map[string]any, recursively), as the Firestore client builds
// it: int64 as integerValue, float64 as doubleValue, a nil list or map as
// null. A non-finite number is refused: the model never holds one (JSON
// has none), and storing it would store a value the input could not have
// had.
func appendWireValue(dst []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return appendNull(dst), nil
	case bool:
		dst = protowire.AppendTag(dst, valueBoolean, protowire.VarintType)
		return protowire.AppendVarint(dst, protowire.EncodeBool(x)), nil
	case string:
		return appendWireString(dst, x), nil
	case int:
		return appendWireInt(dst, int64(x)), nil
	case int64:
		return appendWireInt(dst, x), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return dst, fmt.Errorf("cannot store the non-finite number %v", x)
		}
		dst = protowire.AppendTag(dst, valueDouble, protowire.Fixed64Type)
		return protowire.AppendFixed64(dst, math.Float64bits(x)), nil
	case []any:
		if x == nil {
			return appendNull(dst), nil
		}
		dst = beginNested(dst, valueArray)
		arr := len(dst)
		for i, e := range x {
			dst = beginNested(dst, arrayValues)
			el := len(dst)
			var err error
			if dst, err = appendWireValue(dst, e); err != nil {
				return dst, fmt.Errorf("[%d]: %w", i, err)
			}
			dst = endNested(dst, el)
		}
		return endNested(dst, arr), nil
	case []string:
		if x == nil {
			return appendNull(dst), nil
		}
		dst = beginNested(dst, valueArray)
		arr := len(dst)
		for _, s := range x {
			dst = beginNested(dst, arrayValues)
			el := len(dst)
			dst = endNested(appendWireString(dst, s), el)
		}
		return endNested(dst, arr), nil
	case *pb.Value:
		// A value as stored, kept as it is (a prune's mark rewrites
		// stored manifest entries it does not decode).
		return proto.MarshalOptions{Deterministic: true}.MarshalAppend(dst, x)
	case map[string]any:
		if x == nil {
			return appendNull(dst), nil
		}
		dst = beginNested(dst, valueMap)
		m := len(dst)
		var err error
		if dst, err = appendWireFields(dst, mapValueFields, x); err != nil {
			return dst, err
		}
		return endNested(dst, m), nil
	}
	return dst, fmt.Errorf("cannot store a value of type %T", v)
}

func appendNull(dst []byte) []byte {
	dst = protowire.AppendTag(dst, valueNull, protowire.VarintType)
	return protowire.AppendVarint(dst, 0)
}

func appendWireString(dst []byte, s string) []byte {
	dst = protowire.AppendTag(dst, valueString, protowire.BytesType)
	return protowire.AppendString(dst, s)
}

func appendWireInt(dst []byte, n int64) []byte {
	dst = protowire.AppendTag(dst, valueInteger, protowire.VarintType)
	return protowire.AppendVarint(dst, uint64(n))
}

// beginNested starts field num holding a message, whose body follows;
// endNested, given where the body starts, ends it.
func beginNested(dst []byte, num protowire.Number) []byte {
	return protowire.AppendTag(dst, num, protowire.BytesType)
}

// endNested ends the message whose body began at start: the body, written
// in place, moves up by the size of its length, which is known only now.
func endNested(dst []byte, start int) []byte {
	n := len(dst) - start
	var lenBuf [10]byte // the longest varint
	l := protowire.AppendVarint(lenBuf[:0], uint64(n))
	dst = append(dst, l...)
	copy(dst[start+len(l):], dst[start:start+n])
	copy(dst[start:], l)
	return dst
}

// SetWrite is the Write that replaces document name with layout
// struct v, as Transaction.Set sends it (EncodeFields: the client's
// encoding of the layout types).
func SetWrite(name string, v any) (*pb.Write, error) {
	w, err := WireSetWrite(name, EncodeFields(v))
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", BaseName(name), err)
	}
	return w, nil
}

// UpdateWrite is the Write that sets the top-level fields of
// document name that fields holds, and only those, on a document that
// must exist: what Transaction.Update sends for []firestore.Update of
// those paths (each value the layout's encoding, EncodeFields).
func UpdateWrite(name string, fields map[string]any) (*pb.Write, error) {
	w, err := WireSetWrite(name, fields)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", BaseName(name), err)
	}
	mask := &pb.DocumentMask{}
	for k := range fields {
		mask.FieldPaths = append(mask.FieldPaths, k)
	}
	w.UpdateMask = mask
	w.CurrentDocument = &pb.Precondition{ConditionType: &pb.Precondition_Exists{Exists: true}}
	return w, nil
}

// FieldsOf is a document read on the Firestore API as
// DocumentSnapshot.Data gives it (fstx.Fields): what DecodeFields reads.
func FieldsOf(doc *pb.Document) map[string]any { return fstx.Fields(doc) }

// BaseName is the last segment of document name: its id.
func BaseName(name string) string { return name[strings.LastIndexByte(name, '/')+1:] }
