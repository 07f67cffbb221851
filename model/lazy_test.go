package model

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// openText writes in to a file and opens it lazily.
func openText(t *testing.T, in string) (*Snapshot, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "in.json")
	if err := os.WriteFile(path, []byte(in), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path)
	if err == nil {
		t.Cleanup(func() { s.Close() })
	}
	return s, err
}

// problemText is err's problems, sorted (one district's are found in map
// order), or its message.
func problemText(err error) string {
	var ve *ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	var ps []string
	for _, p := range ve.Problems {
		ps = append(ps, p.String())
	}
	slices.Sort(ps)
	return strings.Join(ps, "\n")
}

// readBoth reads in as Decode and as Open do, and validates both; it
// fails the test unless both agree, and returns the snapshots (nil on an
// error) and the error.
func readBoth(t *testing.T, in, id string) (mem, lazy *Snapshot, err error) {
	t.Helper()
	check := func(s *Snapshot, err error) (*Snapshot, error) {
		if err == nil {
			err = Validate(s, id)
		}
		return s, err
	}
	mem, merr := check(Decode(strings.NewReader(in)))
	lazy, lerr := check(openText(t, in))
	switch {
	case (merr == nil) != (lerr == nil):
		t.Fatalf("Decode: %v\nOpen: %v", merr, lerr)
	case merr != nil:
		if !errors.Is(lerr, ErrInvalid) || problemText(merr) != problemText(lerr) {
			t.Fatalf("Decode: %v\nOpen:   %v", merr, lerr)
		}
		return nil, nil, merr
	}
	return mem, lazy, nil
}

// A lazily read snapshot is refused exactly as a decoded one, with the
// same problems at the same paths, lines and columns.
func TestOpenRefusesAsDecodeDoes(t *testing.T) {
	const day = "2026-11-20"
	gen := func(edit func(s *Snapshot)) string {
		s := Generate(day, 5, 1)
		edit(s)
		b, err := Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	district := `{"districtId":"1","asOfDate":"2026-11-20","membership":{"total":5,"byClub":[{"club":"a","n":1,` + "\n" + `"n":2}]}}`
	cases := map[string]string{
		"malformed":         `{"snapshot_id": "x",`,
		"syntax position":   "{\n  \"a\": tru\n}",
		"trailing garbage":  `{"payload":{"districts":[],"metadata":{}}}}`,
		"not an object":     `[1]`,
		"empty":             ``,
		"byte-order mark":   "\xEF\xBB\xBF{}",
		"district not obj":  `{"payload":{"districts":[1],"metadata":{}}}`,
		"districtId number": `{"payload":{"districts":[{"districtId":7},{"districtId":true}],"metadata":{}}}`,
		"duplicate in data": `{"payload":{"metadata":{},"districts":[` + district + `]}}`,
		"lone surrogate":    `{"payload":{"metadata":{},"districts":[{"districtId":"1","s":"\ud800x"}]}}`,
		"invalid UTF-8":     "{\"payload\":{\"metadata\":{},\"districts\":[{\"districtId\":\"1\",\"s\":\"\xff\"}]}}",
		"integer overflow":  `{"payload":{"districts":[{"districtId":"1","n":99999999999999999999}],"metadata":{}}}`,
		"too deep":          `{"payload":{"metadata":{},"districts":[{"districtId":"1","x":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}]}}`,
		"bad district id":   gen(func(s *Snapshot) { setID(s, 2, "4/2") }),
		"duplicate id":      gen(func(s *Snapshot) { setID(s, 3, "2") }),
		"missing id":        gen(func(s *Snapshot) { delete(s.Payload.Districts[1].data, "districtId") }),
		"bad asOfDate":      gen(func(s *Snapshot) { s.Payload.Districts[1].data["asOfDate"] = "2026-02-30" }),
		"oversize district": gen(func(s *Snapshot) { s.Payload.Districts[0].data["blob"] = strings.Repeat("x", 1<<20) }),
		"nested array":      gen(func(s *Snapshot) { s.Payload.Districts[0].data["m"] = []any{[]any{int64(1)}} }),
		"reserved key":      gen(func(s *Snapshot) { s.Payload.Districts[4].data["__x__"] = int64(1) }),
		"several districts": gen(func(s *Snapshot) {
			s.Payload.Districts[0].data["__a__"], s.Payload.Districts[0].data[""] = int64(1), true
		}),
		"too deep for store": gen(func(s *Snapshot) { s.Payload.Districts[2].data["d"] = nest(25) }),
		"root too large":     gen(func(s *Snapshot) { s.Rankings["blob"] = strings.Repeat("r", 1<<20) }),
		"bad status":         gen(func(s *Snapshot) { s.Status = "done" }),
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			if _, _, err := readBoth(t, in, day); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func nest(n int) any {
	if n == 0 {
		return int64(1)
	}
	return Object{"a": nest(n - 1)}
}

// A lazily read snapshot is the decoded one: the same districts, data,
// hashes and sizes, and the same canonical JSON; each district's data is
// read back from the file once per Data call, never before.
func TestOpenIsDecode(t *testing.T) {
	src := Generate("2026-11-20", 40, 7)
	src.Payload.Districts[3].data["odd"] = Object{"f": 1.0, "i": int64(1), "s": "<&>", "n": nil, "u": "\u00e9\U0001F600"}
	b, err := Marshal(src)
	if err != nil {
		t.Fatal(err)
	}
	mem, lazy, err := readBoth(t, string(b), "2026-11-20")
	if err != nil {
		t.Fatal(err)
	}
	if got := lazy.DataLoads(); got != 0 {
		t.Fatalf("%d district reads before any was asked for", got)
	}
	for i, d := range lazy.Payload.Districts {
		m := mem.Payload.Districts[i]
		if !d.Lazy() || d.data != nil || d.DistrictID != m.DistrictID || d.AsOfDate != m.AsOfDate {
			t.Fatalf("district %d: %+v, want %s %s", i, d, m.DistrictID, m.AsOfDate)
		}
		ls, err := d.Summary()
		if err != nil {
			t.Fatal(err)
		}
		ms, err := m.Summary()
		if err != nil {
			t.Fatal(err)
		}
		if ls != ms {
			t.Errorf("district %s: summary %+v, decoded %+v", d.DistrictID, ls, ms)
		}
	}
	if got := lazy.DataLoads(); got != 0 {
		t.Fatalf("Summary read %d districts back", got)
	}
	data, err := lazy.Payload.Districts[3].Data()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mustMarshal(t, data), mustMarshal(t, mem.Payload.Districts[3].data)) || lazy.DataLoads() != 1 {
		t.Errorf("district 3 read back as %v (%d reads)", data, lazy.DataLoads())
	}
	if a, b := mustMarshal(t, lazy), mustMarshal(t, mem); !bytes.Equal(a, b) {
		t.Error("the lazy snapshot marshals differently")
	}
	if !Equal(lazy, src) {
		t.Errorf("lazy snapshot differs from its source: %s", Diff(lazy, src))
	}
	if got := lazy.DataLoads(); got != 1+2*40 {
		t.Errorf("%d reads, want one per district per Marshal and Equal and one more", got)
	}
}

// Stdin is spooled to a temporary file that is gone at once; the data is
// read back from it until Close.
func TestSpoolLeavesNothing(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	src := Generate("2026-11-20", 3, 1)
	s, err := Spool(bytes.NewReader(mustMarshal(t, src)))
	if err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("spool left %v", left)
	}
	if !Equal(s, src) {
		t.Errorf("spooled snapshot differs: %s", Diff(s, src))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Payload.Districts[0].Data(); err == nil {
		t.Error("district read back after Close")
	}
	// Bad input is refused as from a file, and leaves nothing either.
	if _, err := Spool(strings.NewReader(`{"payload":`)); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad spooled input: %v", err)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("spool left %v", left)
	}
}

// A file changed after it was checked is refused when a district is read
// back, not stored under the hashes of what was checked.
func TestOpenNoticesAChangedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "in.json")
	b := mustMarshal(t, Generate("2026-11-20", 2, 1))
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	i := bytes.Index(b, []byte(`"membership"`))
	copy(b[i:], `"Membership"`)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Payload.Districts[0].Data(); err == nil || !strings.Contains(err.Error(), "changed after it was read") {
		t.Errorf("changed file read back: %v", err)
	}
}
