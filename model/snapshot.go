package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
)

// Snapshot is the application's Snapshot: one day's statistics for every
// district, as the scraper produced them. Its JSON form uses the
// application's snake_case keys; unknown keys are kept in Extra.
type Snapshot struct {
	SnapshotID         string   // snapshot_id
	CreatedAt          string   // created_at
	SchemaVersion      string   // schema_version
	CalculationVersion string   // calculation_version
	Status             string   // status: "success" | "partial" | "failed"
	Errors             []string // errors
	Payload            Payload  // payload
	// Rankings is AllDistrictsRankingsData, verbatim; nil when absent.
	Rankings Object
	// Extra holds top-level keys the model does not name.
	Extra Object
	lazy  *lazyInput // the input file of a lazily read snapshot
}

// Payload is the snapshot's payload: the districts and how they were fetched.
type Payload struct {
	Districts []DistrictStatistics
	Metadata  PayloadMetadata
	// Extra holds payload keys the model does not name.
	Extra Object
}

// PayloadMetadata describes a scrape. Optional fields are nil or empty when
// the input lacks them, and are then left out of the JSON.
type PayloadMetadata struct {
	Source               string
	FetchedAt            string
	DataAsOfDate         string
	DistrictCount        int64
	ProcessingDurationMs int64
	ConfiguredDistricts  []string
	SuccessfulDistricts  []string
	FailedDistricts      []string
	DistrictErrors       []any
	IsClosingPeriodData  *bool
	CollectionDate       string
	LogicalDate          string
	// Extra holds metadata keys the model does not name.
	Extra Object
}

// DistrictStatistics is one district's statistics. Its data (Data) is the
// district's whole JSON object (membership, clubs, education, dashboard
// rows, and any field the model does not name), stored and returned
// verbatim; DistrictID and AsOfDate are read from it for convenience and
// must agree with it.
//
// A district read by Open, Spool or LoadDir keeps its data in the input
// file (Lazy), and Data reads it back; one built in memory holds it
// (NewDistrict, Generate, Decode).
type DistrictStatistics struct {
	DistrictID string
	AsOfDate   string
	data       Object    // the data held in memory; nil when lazy
	lazy       *lazyData // where the data is when it is left in the input file
}

// NewDistrict is the district whose data is data, held in memory (not
// copied: changes to data are the district's). Its DistrictID and
// AsOfDate are data's districtId and asOfDate, when they are strings.
func NewDistrict(data Object) DistrictStatistics {
	id, _ := data["districtId"].(string)
	asOf, _ := data["asOfDate"].(string)
	return DistrictStatistics{DistrictID: id, AsOfDate: asOf, data: data}
}

// Snapshot JSON keys, in the application's spelling.
var (
	snapshotKeys = []string{"snapshot_id", "created_at", "schema_version", "calculation_version", "status", "errors", "payload", "rankings"}
	payloadKeys  = []string{"districts", "metadata"}
	metadataKeys = []string{"source", "fetchedAt", "dataAsOfDate", "districtCount", "processingDurationMs",
		"configuredDistricts", "successfulDistricts", "failedDistricts", "districtErrors",
		"isClosingPeriodData", "collectionDate", "logicalDate"}
)

// Decode reads a Snapshot in the application's JSON form. Malformed JSON and
// values of the wrong type are reported as a *ValidationError (ErrInvalid)
// listing every problem with its path; Validate checks the rest.
func Decode(r io.Reader) (*Snapshot, error) {
	o, err := DecodeObject(r)
	if err != nil {
		return nil, err
	}
	return fromTree(o)
}

// UnmarshalJSON decodes the application's JSON form.
func (s *Snapshot) UnmarshalJSON(b []byte) error {
	d, err := Decode(bytes.NewReader(b))
	if err != nil {
		return err
	}
	*s = *d
	return nil
}

// MarshalJSON encodes the application's JSON form, canonically (see Marshal).
func (s Snapshot) MarshalJSON() ([]byte, error) { return Marshal(s) }

// MarshalJSON encodes the metadata with its camelCase keys.
func (m PayloadMetadata) MarshalJSON() ([]byte, error) { return Marshal(m.tree()) }

// UnmarshalJSON decodes metadata with its camelCase keys.
func (m *PayloadMetadata) UnmarshalJSON(b []byte) error {
	o, err := DecodeObject(bytes.NewReader(b))
	if err != nil {
		return err
	}
	var p problems
	*m = metadataFromTree(o, "$", &p)
	return p.err()
}

// fromTree builds a Snapshot from a canonical tree, which it takes over.
func fromTree(o Object) (*Snapshot, error) {
	var p problems
	s := &Snapshot{
		SnapshotID:         str(o, "snapshot_id", "$", &p),
		CreatedAt:          str(o, "created_at", "$", &p),
		SchemaVersion:      str(o, "schema_version", "$", &p),
		CalculationVersion: str(o, "calculation_version", "$", &p),
		Status:             str(o, "status", "$", &p),
		Errors:             strList(o, "errors", "$", &p),
		Extra:              extra(o, snapshotKeys),
	}
	if r, ok := o["rankings"]; ok && r != nil {
		if m, ok := r.(map[string]any); ok {
			s.Rankings = m
		} else {
			p.add("$.rankings", "want an object, got %s", kindOf(r))
		}
	}
	payload, ok := o["payload"].(map[string]any)
	switch {
	case o["payload"] == nil:
		p.add("$.payload", "missing: a snapshot needs payload.districts and payload.metadata")
	case !ok:
		p.add("$.payload", "want an object, got %s", kindOf(o["payload"]))
	default:
		s.Payload.Extra = extra(payload, payloadKeys)
		if md, ok := payload["metadata"].(map[string]any); ok {
			s.Payload.Metadata = metadataFromTree(md, "$.payload.metadata", &p)
		} else if payload["metadata"] != nil {
			p.add("$.payload.metadata", "want an object, got %s", kindOf(payload["metadata"]))
		} else {
			p.add("$.payload.metadata", "missing")
		}
		switch list := payload["districts"].(type) {
		case []any:
			s.Payload.Districts = make([]DistrictStatistics, 0, len(list))
			for i, e := range list {
				path := fmt.Sprintf("$.payload.districts[%d]", i)
				var ds DistrictStatistics
				switch d := e.(type) {
				case map[string]any:
					ds = DistrictStatistics{data: d}
				case *lazyData:
					ds = DistrictStatistics{lazy: d}
				default:
					p.add(path, "want a district object, got %s", kindOf(e))
					continue
				}
				head := ds.head()
				ds.DistrictID, ds.AsOfDate = str(head, "districtId", path, &p), str(head, "asOfDate", path, &p)
				s.Payload.Districts = append(s.Payload.Districts, ds)
			}
		case nil:
			p.add("$.payload.districts", "missing: want an array of districts")
		default:
			p.add("$.payload.districts", "want an array of districts, got %s", kindOf(list))
		}
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	return s, nil
}

func metadataFromTree(md Object, path string, p *problems) PayloadMetadata {
	m := PayloadMetadata{
		Source:               str(md, "source", path, p),
		FetchedAt:            str(md, "fetchedAt", path, p),
		DataAsOfDate:         str(md, "dataAsOfDate", path, p),
		DistrictCount:        integer(md, "districtCount", path, p),
		ProcessingDurationMs: integer(md, "processingDurationMs", path, p),
		ConfiguredDistricts:  strList(md, "configuredDistricts", path, p),
		SuccessfulDistricts:  strList(md, "successfulDistricts", path, p),
		FailedDistricts:      strList(md, "failedDistricts", path, p),
		CollectionDate:       str(md, "collectionDate", path, p),
		LogicalDate:          str(md, "logicalDate", path, p),
		Extra:                extra(md, metadataKeys),
	}
	if v, ok := md["districtErrors"]; ok && v != nil {
		if l, ok := v.([]any); ok {
			m.DistrictErrors = l
		} else {
			p.add(path+".districtErrors", "want an array, got %s", kindOf(v))
		}
	}
	if v, ok := md["isClosingPeriodData"]; ok && v != nil {
		if b, ok := v.(bool); ok {
			m.IsClosingPeriodData = &b
		} else {
			p.add(path+".isClosingPeriodData", "want a boolean, got %s", kindOf(v))
		}
	}
	return m
}

// tree is the snapshot's canonical JSON tree. Required keys of the
// application's type are always present; optional ones only when set. The
// data of lazily read districts is read back for it.
func (s Snapshot) tree() (Object, error) {
	o := Object{}
	maps.Copy(o, s.Extra)
	o["snapshot_id"] = s.SnapshotID
	o["created_at"] = s.CreatedAt
	o["schema_version"] = s.SchemaVersion
	o["calculation_version"] = s.CalculationVersion
	o["status"] = s.Status
	o["errors"] = anyList(s.Errors)
	payload := Object{}
	maps.Copy(payload, s.Payload.Extra)
	districts := make([]any, len(s.Payload.Districts))
	for i, d := range s.Payload.Districts {
		t, err := d.tree()
		if err != nil {
			return nil, fmt.Errorf("district %s: %w", d.DistrictID, err)
		}
		districts[i] = t
	}
	payload["districts"] = districts
	payload["metadata"] = s.Payload.Metadata.tree()
	o["payload"] = payload
	if s.Rankings != nil {
		o["rankings"] = s.Rankings
	}
	return o, nil
}

// head is what the district's districtId and asOfDate are read from: its
// data, or what was kept of a lazily read district's data.
func (d DistrictStatistics) head() Object {
	if d.Lazy() {
		return d.lazy.head
	}
	return d.data
}

// tree is the district's object: its data, or a minimal object when it has
// none.
func (d DistrictStatistics) tree() (Object, error) {
	if d.Lazy() {
		return d.lazy.load()
	}
	if d.data != nil {
		return d.data, nil
	}
	o := Object{"districtId": d.DistrictID}
	if d.AsOfDate != "" {
		o["asOfDate"] = d.AsOfDate
	}
	return o, nil
}

func (m PayloadMetadata) tree() Object {
	o := Object{}
	maps.Copy(o, m.Extra)
	o["source"] = m.Source
	o["fetchedAt"] = m.FetchedAt
	o["dataAsOfDate"] = m.DataAsOfDate
	o["districtCount"] = m.DistrictCount
	o["processingDurationMs"] = m.ProcessingDurationMs
	setList := func(k string, l []string) {
		if l != nil {
			o[k] = anyList(l)
		}
	}
	setList("configuredDistricts", m.ConfiguredDistricts)
	setList("successfulDistricts", m.SuccessfulDistricts)
	setList("failedDistricts", m.FailedDistricts)
	m.PutOptional(o)
	return o
}

// PutOptional sets in o the optional fields of m that are present
// (districtErrors, isClosingPeriodData, collectionDate, logicalDate), as
// both the input format and the stored root metadata carry them.
func (m PayloadMetadata) PutOptional(o map[string]any) {
	if m.DistrictErrors != nil {
		o["districtErrors"] = m.DistrictErrors
	}
	if m.IsClosingPeriodData != nil {
		o["isClosingPeriodData"] = *m.IsClosingPeriodData
	}
	if m.CollectionDate != "" {
		o["collectionDate"] = m.CollectionDate
	}
	if m.LogicalDate != "" {
		o["logicalDate"] = m.LogicalDate
	}
}

// anyList is l as a canonical list: never nil, so an absent list is written
// as [].
func anyList(l []string) []any {
	a := make([]any, len(l))
	for i, e := range l {
		a[i] = e
	}
	return a
}

// extra returns the keys of o not in known, or nil.
func extra(o Object, known []string) Object {
	var out Object
outer:
	for k, v := range o {
		for _, kk := range known {
			if k == kk {
				continue outer
			}
		}
		if out == nil {
			out = Object{}
		}
		out[k] = v
	}
	return out
}

func str(o Object, key, path string, p *problems) string {
	v, ok := o[key]
	if !ok || v == nil {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		p.add(childPath(path, key), "want a string, got %s", kindOf(v))
	}
	return s
}

func integer(o Object, key, path string, p *problems) int64 {
	v, ok := o[key]
	if !ok || v == nil {
		return 0
	}
	n, ok := v.(int64)
	if !ok {
		p.add(childPath(path, key), "want an integer, got %s", describe(v))
	}
	return n
}

func strList(o Object, key, path string, p *problems) []string {
	v, ok := o[key]
	if !ok || v == nil {
		return nil
	}
	l, ok := v.([]any)
	if !ok {
		p.add(childPath(path, key), "want an array of strings, got %s", kindOf(v))
		return nil
	}
	out := make([]string, len(l))
	for i, e := range l {
		s, ok := e.(string)
		if !ok {
			p.add(fmt.Sprintf("%s[%d]", childPath(path, key), i), "want a string, got %s", kindOf(e))
		}
		out[i] = s
	}
	return out
}

func describe(v any) string {
	if f, ok := v.(float64); ok {
		b, _ := json.Marshal(f)
		return "the number " + string(b)
	}
	return kindOf(v)
}
