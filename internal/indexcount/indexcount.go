// Package indexcount counts the index entries Cloud Firestore (Standard
// edition) keeps for a document under an index configuration in the format
// of firestore.indexes.json, so that tests can check documents against
// Firestore's limit of 40,000 index entries per document and measure the
// index fan-out of a write, which the emulator does not model.
//
// The rules are Firestore's documented automatic indexing (see
// docs/indexes.md for the sources):
//
//   - a field that is neither an array nor a map has two single-field
//     index entries, ascending and descending;
//   - an array field has one array-contains index, with an entry per
//     distinct element; Firestore does not index into arrays, so the maps
//     an array holds add no further entries;
//   - a map field is not indexed itself: its subfields are, recursively,
//     by the rules above;
//   - a field override replaces those settings for its field and, when the
//     field is a map, for its subfields, unless a subfield has an override
//     of its own; "indexes": [] (an exemption) disables them all;
//   - a composite index has, per document that has every field it names, the
//     product of an entry per ordered field and one per distinct element of
//     its array-contains field.
//
// A document's count is its single-field entries plus its composite ones.
package indexcount

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/protobuf/proto"
)

// MaxEntriesPerDocument is Firestore's limit on the index entries of one
// document (single-field and composite together).
const MaxEntriesPerDocument = 40000

// Index modes and query scopes as firestore.indexes.json spells them.
const (
	Ascending       = "ASCENDING"
	Descending      = "DESCENDING"
	Contains        = "CONTAINS"
	ScopeCollection = "COLLECTION"
	ScopeGroup      = "COLLECTION_GROUP"
)

// Config is an index configuration in the format of firestore.indexes.json
// (the fields this package and the deploy script use).
type Config struct {
	Indexes        []Index         `json:"indexes"`
	FieldOverrides []FieldOverride `json:"fieldOverrides"`
}

// Index is a composite index.
type Index struct {
	CollectionGroup string       `json:"collectionGroup"`
	QueryScope      string       `json:"queryScope"`
	Fields          []IndexField `json:"fields"`
}

// IndexField is one field of a composite index: an order or an
// arrayConfig.
type IndexField struct {
	FieldPath   string `json:"fieldPath"`
	Order       string `json:"order,omitempty"`
	ArrayConfig string `json:"arrayConfig,omitempty"`
}

// FieldOverride replaces the automatic single-field indexes of a field (and
// of its subfields) in a collection group. An empty Indexes is an
// exemption: the field is not indexed at all.
type FieldOverride struct {
	CollectionGroup string       `json:"collectionGroup"`
	FieldPath       string       `json:"fieldPath"`
	Indexes         []FieldIndex `json:"indexes"`
}

// FieldIndex is one single-field index of an override.
type FieldIndex struct {
	Order       string `json:"order,omitempty"`
	ArrayConfig string `json:"arrayConfig,omitempty"`
	QueryScope  string `json:"queryScope,omitempty"`
}

// Exempt reports whether o disables every index of its field.
func (o FieldOverride) Exempt() bool { return len(o.Indexes) == 0 }

// Load reads the index configuration at path.
func Load(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, err
	}
	return Parse(b)
}

// Parse decodes an index configuration and checks its field paths.
func Parse(b []byte) (Config, error) {
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return Config{}, fmt.Errorf("index configuration: %w", err)
	}
	for _, o := range c.FieldOverrides {
		if _, err := ParseFieldPath(o.FieldPath); err != nil || o.CollectionGroup == "" {
			return Config{}, fmt.Errorf("index configuration: field override %q in %q: %v", o.FieldPath, o.CollectionGroup, err)
		}
	}
	for _, ix := range c.Indexes {
		for _, f := range ix.Fields {
			if _, err := ParseFieldPath(f.FieldPath); err != nil {
				return Config{}, fmt.Errorf("index configuration: composite index on %q: %w", ix.CollectionGroup, err)
			}
		}
	}
	return c, nil
}

// Exemptions are c's field overrides that disable every index.
func (c Config) Exemptions() []FieldOverride {
	var ex []FieldOverride
	for _, o := range c.FieldOverrides {
		if o.Exempt() {
			ex = append(ex, o)
		}
	}
	return ex
}

// WithoutExemptions is c without its exemptions: the composite indexes and
// the other overrides, as a database has them before the exemptions are
// deployed.
func (c Config) WithoutExemptions() Config {
	out := Config{Indexes: c.Indexes}
	for _, o := range c.FieldOverrides {
		if !o.Exempt() {
			out.FieldOverrides = append(out.FieldOverrides, o)
		}
	}
	return out
}

// Counts are a document's index entries.
type Counts struct {
	SingleField int
	Composite   int
}

// Total is the figure Firestore's per-document limit applies to.
func (c Counts) Total() int { return c.SingleField + c.Composite }

// Count counts the index entries of document doc of collection group group
// (its collection's id) under c.
func (c Config) Count(group string, doc *pb.Document) (Counts, error) {
	return c.count(group, doc.GetFields())
}

// CountMap is Count for a document as the Go client reads it back
// (firestore.DocumentSnapshot.Data).
func (c Config) CountMap(group string, data map[string]any) (Counts, error) {
	fields, err := encodeMap(data)
	if err != nil {
		return Counts{}, err
	}
	return c.count(group, fields)
}

func (c Config) count(group string, fields map[string]*pb.Value) (Counts, error) {
	overrides := map[string][]FieldIndex{}
	for _, o := range c.FieldOverrides {
		if o.CollectionGroup != group {
			continue
		}
		p, err := ParseFieldPath(o.FieldPath)
		if err != nil {
			return Counts{}, err
		}
		overrides[pathKey(p)] = o.Indexes
	}
	var n Counts
	root := &pb.Value{ValueType: &pb.Value_MapValue{MapValue: &pb.MapValue{Fields: fields}}}
	n.SingleField = singleField(nil, root, overrides, nil)
	for _, ix := range c.Indexes {
		if ix.CollectionGroup != group {
			continue
		}
		e, err := composite(ix, root)
		if err != nil {
			return Counts{}, err
		}
		n.Composite += e
	}
	return n, nil
}

// settings are the single-field indexes in force for one field: nil for
// the automatic ones.
type settings []FieldIndex

// singleField counts the single-field entries of value v at path, under
// inherited, the settings of its nearest ancestor with an override.
func singleField(path []string, v *pb.Value, overrides map[string][]FieldIndex, inherited settings) int {
	s := inherited
	if len(path) > 0 {
		if o, ok := overrides[pathKey(path)]; ok {
			s = settings(o)
			if s == nil {
				s = settings{} // an exemption: no indexes, not the automatic ones
			}
		}
	}
	switch x := v.GetValueType().(type) {
	case *pb.Value_MapValue:
		n := 0
		for k, sub := range x.MapValue.GetFields() {
			n += singleField(append(path[:len(path):len(path)], k), sub, overrides, s)
		}
		return n
	case *pb.Value_ArrayValue:
		if s == nil {
			return distinct(x.ArrayValue.GetValues())
		}
		n := 0
		for _, ix := range s {
			if ix.ArrayConfig == Contains {
				n += distinct(x.ArrayValue.GetValues())
			} else if ix.Order != "" {
				n++ // the array ordered as one value
			}
		}
		return n
	default:
		if s == nil {
			return 2
		}
		n := 0
		for _, ix := range s {
			if ix.Order != "" {
				n++
			}
		}
		return n
	}
}

// composite counts the entries of composite index ix for the document
// whose fields are root's: none when it lacks a field the index names.
func composite(ix Index, root *pb.Value) (int, error) {
	n := 1
	for _, f := range ix.Fields {
		if f.FieldPath == "__name__" {
			continue
		}
		p, err := ParseFieldPath(f.FieldPath)
		if err != nil {
			return 0, err
		}
		v := lookup(root, p)
		switch {
		case v == nil:
			return 0, nil
		case f.ArrayConfig == Contains:
			n *= distinct(v.GetArrayValue().GetValues())
		}
	}
	return n, nil
}

// lookup is the value at path p below map value v, nil when there is none.
func lookup(v *pb.Value, p []string) *pb.Value {
	for _, k := range p {
		v = v.GetMapValue().GetFields()[k]
		if v == nil {
			return nil
		}
	}
	return v
}

// distinct counts the distinct values among vs: an index holds one entry
// per indexed value of a document, however often the array repeats it.
func distinct(vs []*pb.Value) int {
	seen := make(map[string]bool, len(vs))
	for _, v := range vs {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(v)
		if err != nil {
			// Unreachable for a valid message; count it as its own value.
			b = []byte(fmt.Sprintf("%p", v))
		}
		seen[string(b)] = true
	}
	return len(seen)
}

// pathKey is a field path as a map key (segments may hold dots).
func pathKey(p []string) string { return strings.Join(p, "\x00") }

// ParseFieldPath splits a field path as firestore.indexes.json and gcloud
// write it: segments separated by dots, a segment that is not a simple
// identifier quoted in backticks (with \` and \\ escapes).
func ParseFieldPath(s string) ([]string, error) {
	if s == "" {
		return nil, fmt.Errorf("empty field path")
	}
	var segs []string
	for i := 0; i <= len(s); {
		if i == len(s) {
			return nil, fmt.Errorf("field path %q ends with a dot", s)
		}
		var seg strings.Builder
		if s[i] == '`' {
			i++
			for ; i < len(s) && s[i] != '`'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				seg.WriteByte(s[i])
			}
			if i == len(s) {
				return nil, fmt.Errorf("field path %q has an unclosed backtick", s)
			}
			i++
		} else {
			for ; i < len(s) && s[i] != '.'; i++ {
				seg.WriteByte(s[i])
			}
		}
		if seg.Len() == 0 {
			return nil, fmt.Errorf("field path %q has an empty segment", s)
		}
		segs = append(segs, seg.String())
		if i == len(s) {
			break
		}
		if s[i] != '.' {
			return nil, fmt.Errorf("field path %q: expected a dot after a quoted segment", s)
		}
		i++
	}
	return segs, nil
}
