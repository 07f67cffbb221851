package indexcount

import (
	"slices"
	"testing"
	"time"

	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
)

// city is the document of Firestore's index entry example.
func city() map[string]any {
	return map[string]any{
		"city_name":     "San Francisco",
		"temperatures":  map[string]any{"summer": int64(67), "winter": int64(55)},
		"neighborhoods": []any{"Mission", "Downtown", "Marina"},
	}
}

func mustParse(t *testing.T, s string) Config {
	t.Helper()
	c, err := Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func count(t *testing.T, c Config, group string, doc map[string]any) Counts {
	t.Helper()
	n, err := c.CountMap(group, doc)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Each expected figure is derived by hand from the documented rules, in
// the comment beside it.
func TestCountRules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		config string
		doc    map[string]any
		single int
		comp   int
	}{
		// city_name asc+desc 2; temperatures.summer and .winter 2 each;
		// neighborhoods array-contains, 3 elements: 3.
		{"automatic", `{}`, city(), 9, 0},
		// The composite (city_name, neighborhoods CONTAINS): 1 × 3.
		{"composite", `{"indexes":[{"collectionGroup":"cities","queryScope":"COLLECTION","fields":[
			{"fieldPath":"city_name","order":"ASCENDING"},{"fieldPath":"neighborhoods","arrayConfig":"CONTAINS"}]}]}`,
			city(), 9, 3},
		// A document lacking a field of the composite is not in it; the
		// composite of another group does not count either.
		{"composite absent field", `{"indexes":[
			{"collectionGroup":"cities","queryScope":"COLLECTION","fields":[{"fieldPath":"population","order":"ASCENDING"},{"fieldPath":"__name__","order":"DESCENDING"}]},
			{"collectionGroup":"towns","queryScope":"COLLECTION","fields":[{"fieldPath":"city_name","order":"ASCENDING"},{"fieldPath":"__name__","order":"DESCENDING"}]}]}`,
			city(), 9, 0},
		// __name__ adds no factor: 1 entry.
		{"composite with name", `{"indexes":[{"collectionGroup":"cities","queryScope":"COLLECTION","fields":[
			{"fieldPath":"temperatures.summer","order":"ASCENDING"},{"fieldPath":"__name__","order":"DESCENDING"}]}]}`,
			city(), 9, 1},
		// Exempting the map exempts its two subfields: 9 − 4.
		{"exempt map", `{"fieldOverrides":[{"collectionGroup":"cities","fieldPath":"temperatures","indexes":[]}]}`,
			city(), 5, 0},
		// Exempting the array removes its 3 array-contains entries.
		{"exempt array", `{"fieldOverrides":[{"collectionGroup":"cities","fieldPath":"neighborhoods","indexes":[]}]}`,
			city(), 6, 0},
		// An exemption in another collection group changes nothing.
		{"other group", `{"fieldOverrides":[{"collectionGroup":"towns","fieldPath":"temperatures","indexes":[]}]}`,
			city(), 9, 0},
		// A subfield's own override wins over its exempted map: summer
		// ascending only, 1; winter inherits the exemption, 0.
		{"subfield override", `{"fieldOverrides":[
			{"collectionGroup":"cities","fieldPath":"temperatures","indexes":[]},
			{"collectionGroup":"cities","fieldPath":"temperatures.summer","indexes":[{"order":"ASCENDING","queryScope":"COLLECTION"}]}]}`,
			city(), 2 + 1 + 3, 0},
		// An override with both scopes is two indexes: ascending in the
		// collection and in the group, 2 entries instead of 2 automatic.
		{"scopes", `{"fieldOverrides":[{"collectionGroup":"cities","fieldPath":"city_name","indexes":[
			{"order":"ASCENDING","queryScope":"COLLECTION"},{"order":"ASCENDING","queryScope":"COLLECTION_GROUP"},
			{"arrayConfig":"CONTAINS","queryScope":"COLLECTION"}]}]}`,
			city(), 2 + 4 + 3, 0},
		// Duplicates share an entry: "a", "b" → 2; maps in an array are
		// one value each and not indexed inside: {x:1} twice, {x:2} → 2;
		// the empty array and the empty map have no entries.
		{"arrays", `{}`, map[string]any{
			"tags": []any{"a", "a", "b"},
			"rows": []any{map[string]any{"x": int64(1)}, map[string]any{"x": int64(1)}, map[string]any{"x": int64(2)}},
			"none": []any{},
			"nil":  map[string]any{},
		}, 4, 0},
		// Maps recurse: a.b.c and a.d are two scalars, 4; null, bool,
		// double, bytes and timestamps are scalars too, 2 each.
		{"nesting and types", `{}`, map[string]any{
			"a": map[string]any{"b": map[string]any{"c": int64(1)}, "d": "x"},
			"n": nil, "t": true, "f": 1.5, "bs": []byte("x"), "ts": time.Unix(0, 0),
		}, 4 + 10, 0},
		// A quoted segment names a key with a dot: only "Mem. Base" is
		// exempt, "Mem" and "Base" keep 2 each.
		{"quoted path", "{\"fieldOverrides\":[{\"collectionGroup\":\"cities\",\"fieldPath\":\"row.`Mem. Base`\",\"indexes\":[]}]}",
			map[string]any{"row": map[string]any{"Mem. Base": int64(1), "Mem": int64(2), "Base": int64(3)}}, 4, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := count(t, mustParse(t, tc.config), "cities", tc.doc)
			if got.SingleField != tc.single || got.Composite != tc.comp || got.Total() != tc.single+tc.comp {
				t.Errorf("counts %+v, want %d single-field and %d composite", got, tc.single, tc.comp)
			}
		})
	}
}

// A document given in the wire form counts as the same document read back
// by the Go client.
func TestCountProtoMatchesMap(t *testing.T) {
	t.Parallel()
	c := mustParse(t, `{"fieldOverrides":[{"collectionGroup":"cities","fieldPath":"temperatures","indexes":[]}]}`)
	fields, err := encodeMap(city())
	if err != nil {
		t.Fatal(err)
	}
	fromProto, err := c.Count("cities", &pb.Document{Fields: fields})
	if err != nil {
		t.Fatal(err)
	}
	if fromMap := count(t, c, "cities", city()); fromProto != fromMap {
		t.Errorf("proto %+v, map %+v", fromProto, fromMap)
	}
}

func TestUnsupportedValue(t *testing.T) {
	t.Parallel()
	if _, err := (Config{}).CountMap("g", map[string]any{"x": struct{}{}}); err == nil {
		t.Error("a struct value was counted")
	}
}

func TestExemptions(t *testing.T) {
	t.Parallel()
	c := mustParse(t, `{"indexes":[{"collectionGroup":"g","queryScope":"COLLECTION","fields":[{"fieldPath":"a","order":"ASCENDING"},{"fieldPath":"__name__","order":"DESCENDING"}]}],
		"fieldOverrides":[{"collectionGroup":"g","fieldPath":"a","indexes":[{"order":"ASCENDING"}]},
		{"collectionGroup":"g","fieldPath":"b","indexes":[]},{"collectionGroup":"h","fieldPath":"c","indexes":[]}]}`)
	var ex []string
	for _, o := range c.Exemptions() {
		ex = append(ex, o.CollectionGroup+"/"+o.FieldPath)
	}
	if !slices.Equal(ex, []string{"g/b", "h/c"}) {
		t.Errorf("Exemptions = %v", ex)
	}
	w := c.WithoutExemptions()
	if len(w.Indexes) != 1 || len(w.FieldOverrides) != 1 || w.FieldOverrides[0].FieldPath != "a" {
		t.Errorf("WithoutExemptions = %+v", w)
	}
	doc := map[string]any{"a": int64(1), "b": int64(2)}
	// a ascending only 1, b exempt 0, the composite 1; then b's 2 back.
	if got := count(t, c, "g", doc).Total(); got != 2 {
		t.Errorf("with exemptions %d entries, want 2", got)
	}
	if got := count(t, w, "g", doc).Total(); got != 4 {
		t.Errorf("without exemptions %d entries, want 4", got)
	}
}

func TestParseFieldPath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][]string{
		"a":               {"a"},
		"metadata.status": {"metadata", "status"},
		"`Mem. Base`":     {"Mem. Base"},
		"a.`b.c`.d":       {"a", "b.c", "d"},
		"`x\\`y`":         {"x`y"},
	} {
		got, err := ParseFieldPath(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseFieldPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "a.", ".a", "a..b", "`a", "`a`b", "``"} {
		if got, err := ParseFieldPath(bad); err == nil {
			t.Errorf("ParseFieldPath(%q) = %q, want an error", bad, got)
		}
	}
	if _, err := Parse([]byte(`{"fieldOverrides":[{"collectionGroup":"g","fieldPath":"a..b","indexes":[]}]}`)); err == nil {
		t.Error("Parse took a bad field path")
	}
}
