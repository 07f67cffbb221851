package gate

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Class is what a field is to the month-end closing rule.
type Class string

// The field classes a policy assigns.
const (
	// Unclassified is a field no pattern of the policy matches: it holds
	// under the closing rule, because an unknown field cannot be judged.
	Unclassified Class = "unclassified"
	// Counter is a count: it may move by at most max(50, 10 % of |stored|)
	// under the closing rule.
	Counter Class = "counter"
	// Identity is an id, a name, the region or one of the year's bases: it
	// must not change under the closing rule.
	Identity Class = "identity"
	// Plan is a boolean of the club plan: it may only go false → true under
	// the closing rule.
	Plan Class = "plan"
	// Derived is a rank, percentage, score or status that follows from the
	// other fields: the closing rule ignores it.
	Derived Class = "derived"
	// Volatile is metadata that changes on every computation
	// (calculatedAt, csvFetchedAt, fromCache, version stamps): it is never
	// compared.
	Volatile Class = "volatile"
)

// policyVersion is the only version of the policy file this package reads.
const policyVersion = 1

// ErrPolicy is what every error of ParsePolicy wraps: errors.Is(err,
// ErrPolicy) tells a bad policy file from other failures.
var ErrPolicy = errors.New("gate: invalid policy")

//go:embed default-policy.json
var defaultPolicyJSON []byte

// Policy assigns classes to fields and names the keys that match the
// elements of arrays of objects. Its zero value classifies nothing and
// matches arrays by fingerprint; build one with DefaultPolicy or
// ParsePolicy. A Policy is immutable, so it is safe for concurrent use.
type Policy struct {
	arrayKeys [][]string
	// patterns keeps each class's patterns in file order, for MarshalJSON.
	patterns map[Class][]string
	// names are the bare-name patterns: a key at any depth.
	names map[string]Class
	// paths are the anchored patterns, split on "/".
	paths []pathPattern
}

// pathPattern is an anchored pattern: names from the row's root, "*"
// matching any one name.
type pathPattern struct {
	steps     []string
	wildcards int
	class     Class
}

// policyFile is the file form of a policy.
type policyFile struct {
	Version   int                 `json:"version"`
	ArrayKeys [][]string          `json:"arrayKeys"`
	Classes   map[string][]string `json:"classes"`
}

// DefaultPolicy returns the policy of the embedded default-policy.json: the
// classes of the application's district data and rankings fields (doc.go
// says why each is where it is).
func DefaultPolicy() *Policy {
	p, err := ParsePolicy(defaultPolicyJSON)
	if err != nil {
		// The file is embedded and a test parses it: this is a build defect.
		panic(err)
	}
	return p
}

// ParsePolicy reads a policy file (version 1). It is strict, because a
// typo in a policy would silently loosen or tighten the gate: unknown keys,
// an unknown class, an empty pattern or key, a malformed path and a pattern
// listed twice (in one class or in two) are errors wrapping ErrPolicy that
// name the problem.
func ParsePolicy(b []byte) (*Policy, error) {
	if err := checkKeys(b); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f policyFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPolicy, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: data after the policy object", ErrPolicy)
	}
	if f.Version != policyVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrPolicy, f.Version, policyVersion)
	}
	p := &Policy{patterns: map[Class][]string{}, names: map[string]Class{}}
	for i, ks := range f.ArrayKeys {
		if len(ks) == 0 {
			return nil, fmt.Errorf("%w: arrayKeys[%d] is empty", ErrPolicy, i)
		}
		for _, k := range ks {
			if k == "" {
				return nil, fmt.Errorf("%w: arrayKeys[%d] has an empty key", ErrPolicy, i)
			}
		}
		p.arrayKeys = append(p.arrayKeys, append([]string(nil), ks...))
	}
	seen := map[string]Class{}
	// Sorted, so that an error naming two classes names them the same way
	// every time.
	for _, name := range slices.Sorted(maps.Keys(f.Classes)) {
		list := f.Classes[name]
		c := Class(name)
		if !fileClass(c) {
			return nil, fmt.Errorf("%w: unknown class %q (want one of volatile, identity, counter, plan, derived)", ErrPolicy, name)
		}
		for _, pat := range list {
			if pat == "" {
				return nil, fmt.Errorf("%w: class %s has an empty pattern", ErrPolicy, c)
			}
			if other, dup := seen[pat]; dup {
				if other == c {
					return nil, fmt.Errorf("%w: pattern %q is listed twice in class %s", ErrPolicy, pat, c)
				}
				return nil, fmt.Errorf("%w: pattern %q is in two classes, %s and %s", ErrPolicy, pat, other, c)
			}
			seen[pat] = c
			if err := p.add(pat, c); err != nil {
				return nil, err
			}
		}
	}
	return p, nil
}

// checkKeys rejects what encoding/json lets through: a key given twice in
// one object (the second would silently replace the first: a class's list
// lost) and a top-level key spelled in another case ("Version").
func checkKeys(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	// One set of seen keys per open object, nil for an open array.
	var open []map[string]bool
	expectKey := func() bool { return len(open) > 0 && open[len(open)-1] != nil }
	key := true // whether the next string in an object is a key
	for {
		tok, err := dec.Token()
		if err != nil {
			// Syntax errors are the decoder's to report, with its position.
			return nil
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				open = append(open, map[string]bool{})
			case '[':
				open = append(open, nil)
			default:
				open = open[:len(open)-1]
			}
			key = true
			if len(open) == 0 {
				return nil
			}
			continue
		case string:
			if expectKey() && key {
				if open[len(open)-1][t] {
					return fmt.Errorf("%w: key %q given twice in one object", ErrPolicy, t)
				}
				if len(open) == 1 && t != "version" && t != "arrayKeys" && t != "classes" {
					return fmt.Errorf("%w: unknown key %q (want version, arrayKeys, classes)", ErrPolicy, t)
				}
				open[len(open)-1][t] = true
				key = false
				continue
			}
		}
		// A value: in an object, a key comes next.
		key = true
	}
}

// fileClass reports whether a policy file may name class c: Unclassified
// is what no pattern says, so no pattern may say it.
func fileClass(c Class) bool {
	switch c {
	case Volatile, Identity, Counter, Plan, Derived:
		return true
	}
	return false
}

// add records pattern pat of class c.
func (p *Policy) add(pat string, c Class) error {
	p.patterns[c] = append(p.patterns[c], pat)
	if !strings.Contains(pat, "/") {
		p.names[pat] = c
		return nil
	}
	steps := strings.Split(pat, "/")
	pp := pathPattern{steps: steps, class: c}
	for _, s := range steps {
		if s == "" {
			return fmt.Errorf("%w: pattern %q has an empty name", ErrPolicy, pat)
		}
		if s == "*" {
			pp.wildcards++
		}
	}
	p.paths = append(p.paths, pp)
	return nil
}

// MarshalJSON returns the policy in its file form, indented, classes in a
// fixed order: what `snapwriter policy` prints and ParsePolicy reads back.
func (p *Policy) MarshalJSON() ([]byte, error) {
	// A struct, not the map policyFile holds, fixes the order of the classes.
	type classes struct {
		Volatile []string `json:"volatile"`
		Identity []string `json:"identity"`
		Counter  []string `json:"counter"`
		Plan     []string `json:"plan"`
		Derived  []string `json:"derived"`
	}
	orEmpty := func(l []string) []string {
		if l == nil {
			return []string{}
		}
		return l
	}
	keys := p.arrayKeys
	if keys == nil {
		keys = [][]string{}
	}
	f := struct {
		Version   int        `json:"version"`
		ArrayKeys [][]string `json:"arrayKeys"`
		Classes   classes    `json:"classes"`
	}{policyVersion, keys, classes{
		orEmpty(p.patterns[Volatile]), orEmpty(p.patterns[Identity]), orEmpty(p.patterns[Counter]),
		orEmpty(p.patterns[Plan]), orEmpty(p.patterns[Derived]),
	}}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(f); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Class returns the class of a field given its object keys from the row's
// root ("data" or "rankings"), array steps left out: ["data", "membership",
// "total"]. The keys are tried from the outermost: the first prefix a
// pattern matches decides for everything inside it, so a pattern may class a
// whole subtree ("data/education/topClubs"). At one depth an anchored path
// beats a bare name, and of two paths the one with fewer "*" wins. No match
// at any depth is Unclassified.
func (p *Policy) Class(keys []string) Class {
	for i := range keys {
		prefix := keys[:i+1]
		best, found := -1, false
		var class Class
		for _, pp := range p.paths {
			if pp.matches(prefix) && (!found || pp.wildcards < best) {
				best, found, class = pp.wildcards, true, pp.class
			}
		}
		if found {
			return class
		}
		if c, ok := p.names[keys[i]]; ok {
			return c
		}
	}
	return Unclassified
}

func (pp pathPattern) matches(keys []string) bool {
	if len(pp.steps) != len(keys) {
		return false
	}
	for i, s := range pp.steps {
		if s != "*" && s != keys[i] {
			return false
		}
	}
	return true
}
