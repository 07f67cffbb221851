package layout

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
)

// The layout types (Root, Page, Fence,
// District and what they hold) are written by their firestore
// tags: by the Firestore client (DocumentRef.Set, Transaction.Set and
// Update encode them by reflection), or, for a district document, through
// EncodeFields. Stored documents are read back into them by DecodeFields,
// from the fields DocumentSnapshot.Data gives, by the same tags: one list
// of field names per type, for writes and reads.
//
// DecodeFields is not DocumentSnapshot.DataTo, which converts a whole
// double to an int64 field and fails a whole document on one value of an
// unexpected type. Reads of the layout take what is stored as it is:
//
//   - a field absent, null or of another type than the layout's is left
//     as its zero value (a pointer nil), as type assertions on the stored
//     map did (`v, _ := m["k"].(string)`); an int64 field takes integers
//     only, never a double;
//   - a pointer field is set only when the field is present with the
//     layout's type, which tells a field an older document lacks from a
//     zero value;
//   - an `any`, []any or map[string]any (model.Object) field takes the
//     stored value itself, with its types (int64 and float64 as Firestore
//     returned them: see docs/numbers.md), never a copy: that is the
//     user's payload, which snapwriter stores verbatim;
//   - a list element of another type than the layout's is that type's
//     zero value, so a list keeps its length;
//   - a present empty list or map is empty, not nil.
//
// The layout types hold only the kinds listed in supportedKind; any other
// is a programming error, and panics (TestLayoutTagsAreFieldConstants
// decodes every layout type).

// layoutField is one stored field of a layout type.
type layoutField struct {
	name      string
	index     []int // reflect.Value.FieldByIndex's
	omitEmpty bool
}

var layoutFieldCache sync.Map // reflect.Type → []layoutField

// layoutFields lists the stored fields of struct type t by their firestore
// tags, as the Firestore client does: untagged exported fields by their
// Go name, "-" left out, the fields of an untagged embedded struct as the
// outer struct's own.
func layoutFields(t reflect.Type) []layoutField {
	if fs, ok := layoutFieldCache.Load(t); ok {
		return fs.([]layoutField)
	}
	fs := collectFields(t, nil)
	seen := map[string]bool{}
	for _, f := range fs {
		if seen[f.name] {
			panic(fmt.Sprintf("snapshot: layout type %s names field %q twice", t, f.name))
		}
		seen[f.name] = true
		if !supportedKind(t.FieldByIndex(f.index).Type) {
			panic(fmt.Sprintf("snapshot: layout type %s: field %q has type %s, which the layout codec does not handle",
				t, f.name, t.FieldByIndex(f.index).Type))
		}
	}
	layoutFieldCache.Store(t, fs)
	return fs
}

func collectFields(t reflect.Type, index []int) []layoutField {
	var fs []layoutField
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("firestore")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		at := append(append([]int(nil), index...), i)
		if sf.Anonymous && name == "" && sf.Type.Kind() == reflect.Struct {
			fs = append(fs, collectFields(sf.Type, at)...)
			continue
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		fs = append(fs, layoutField{name: name, index: at, omitEmpty: opts == "omitempty"})
	}
	return fs
}

var (
	typeOfMap  = reflect.TypeFor[map[string]any]()
	typeOfList = reflect.TypeFor[[]any]()
	typeOfAny  = reflect.TypeFor[any]()
)

// supportedKind reports whether the layout codec reads and writes type t.
func supportedKind(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int64, reflect.Float64:
		return true
	case reflect.Interface:
		return t == typeOfAny
	case reflect.Map:
		return t == typeOfMap
	case reflect.Slice:
		return t == typeOfList || supportedKind(t.Elem())
	case reflect.Pointer:
		return supportedKind(t.Elem())
	case reflect.Struct:
		for _, f := range layoutFields(t) {
			if !supportedKind(t.FieldByIndex(f.index).Type) {
				return false
			}
		}
		return true
	}
	return false
}

// DecodeFields sets *dst, a layout struct, from a stored document's (or
// map's) fields m, by the rules above. dst should be a zero value: fields
// m does not set are left as they are.
func DecodeFields(m map[string]any, dst any) {
	v := reflect.ValueOf(dst)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("snapshot: decodeFields into %T, want a pointer to a struct", dst))
	}
	decodeStruct(m, v.Elem())
}

func decodeStruct(m map[string]any, dst reflect.Value) {
	for _, f := range layoutFields(dst.Type()) {
		if x, ok := m[f.name]; ok {
			decodeValue(x, dst.FieldByIndex(f.index))
		}
	}
}

// decodeValue sets dst from stored value x, and reports whether x has
// dst's type (null has none).
func decodeValue(x any, dst reflect.Value) bool {
	if x == nil {
		return false
	}
	var ok bool
	switch dst.Kind() {
	case reflect.String:
		ok = assign(x, dst.SetString)
	case reflect.Bool:
		ok = assign(x, dst.SetBool)
	case reflect.Int64:
		ok = assign(x, dst.SetInt)
	case reflect.Float64:
		ok = assign(x, dst.SetFloat)
	case reflect.Interface:
		dst.Set(reflect.ValueOf(x))
		ok = true
	case reflect.Map:
		ok = assign(x, func(m map[string]any) { dst.Set(reflect.ValueOf(m)) })
	case reflect.Slice:
		var list []any
		if list, ok = x.([]any); !ok {
			break
		}
		if dst.Type() == typeOfList {
			dst.Set(reflect.ValueOf(list))
			break
		}
		s := reflect.MakeSlice(dst.Type(), len(list), len(list))
		for i, e := range list {
			decodeValue(e, s.Index(i))
		}
		dst.Set(s)
	case reflect.Pointer:
		p := reflect.New(dst.Type().Elem())
		if ok = decodeValue(x, p.Elem()); ok {
			dst.Set(p)
		}
	case reflect.Struct:
		ok = assign(x, func(m map[string]any) { decodeStruct(m, dst) })
	default:
		panic(fmt.Sprintf("snapshot: cannot decode into %s", dst.Type()))
	}
	return ok
}

// assign calls set with x when x is a T, and reports whether it was.
func assign[T any](x any, set func(T)) bool {
	v, ok := x.(T)
	if ok {
		set(v)
	}
	return ok
}

// EncodeFields is layout struct v as the Firestore client writes it (its
// firestore tags, omitempty, a nil pointer, list or map as null), in the
// values DocumentSnapshot.Data gives of it once stored: strings, bools,
// int64, float64, []any and map[string]any. The district document is
// written from it (envelope).
func EncodeFields(v any) map[string]any {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct {
		panic(fmt.Sprintf("snapshot: encodeFields of %T, want a struct", v))
	}
	return encodeStruct(rv)
}

func encodeStruct(v reflect.Value) map[string]any {
	fs := layoutFields(v.Type())
	m := make(map[string]any, len(fs))
	for _, f := range fs {
		fv := v.FieldByIndex(f.index)
		if f.omitEmpty && emptyValue(fv) {
			continue
		}
		m[f.name] = encodeValue(fv)
	}
	return m
}

func encodeValue(v reflect.Value) any {
	switch v.Kind() {
	case reflect.String:
		return v.String()
	case reflect.Bool:
		return v.Bool()
	case reflect.Int64:
		return v.Int()
	case reflect.Float64:
		return v.Float()
	case reflect.Interface, reflect.Map:
		if v.IsNil() {
			return nil
		}
		return v.Interface()
	case reflect.Slice:
		if v.IsNil() {
			return nil
		}
		if v.Type() == typeOfList {
			return v.Interface()
		}
		list := make([]any, v.Len())
		for i := range list {
			list[i] = encodeValue(v.Index(i))
		}
		return list
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return encodeValue(v.Elem())
	case reflect.Struct:
		return encodeStruct(v)
	}
	panic(fmt.Sprintf("snapshot: cannot encode %s", v.Type()))
}

// emptyValue is the Firestore client's omitempty test.
func emptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int64:
		return v.Int() == 0
	case reflect.Float64:
		return v.Float() == 0
	case reflect.Interface, reflect.Pointer:
		return v.IsNil()
	}
	return false
}
