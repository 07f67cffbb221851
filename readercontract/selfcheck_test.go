package readercontract

import (
	"context"
	"testing"

	"github.com/snapwriter/snapwriter/model"
)

// TestChecksDetectDamage shows that checkView can fail: a consistent
// partial snapshot (4 of 6 districts stored) passes, and so does one whose
// root says writing with a district its writer stored but did not record
// yet; each kind of damage to it, or a wrong expectation, is reported —
// also the two a root that says writing must never show: a district it
// records without its document (an over-claim), and a document it does
// not record that does not carry its writerFence (a stray).
func TestChecksDetectDamage(t *testing.T) {
	t.Parallel()
	const date = "2026-11-20"
	in := model.Generate(date, 6, 9)
	var ids []string
	for _, d := range in.Payload.Districts {
		ids = append(ids, d.DistrictID)
	}
	written, unwritten := ids[:4], ids[4:]
	base := want{status: "partial", writeComplete: false, newestSuccessful: false, districts: 4, input: in}
	_, allDocs := appFixture(date, in, ids, "partial", false)
	// writtenBy makes the root ours in the given writeState, written under
	// fence rootFence, and stamps every district document with it.
	const rootFence, otherFence = "000000000000007", "000000000000003"
	writtenBy := func(state string, md map[string]any, docs map[string]map[string]any) {
		md["writeState"], md["writerFence"] = state, rootFence
		for _, d := range docs {
			d["writerFence"] = rootFence
		}
	}
	// stored adds the document of district id, written under fence.
	stored := func(docs map[string]map[string]any, id, fence string) {
		d := make(map[string]any, len(allDocs[id])+1)
		for k, v := range allDocs[id] {
			d[k] = v
		}
		d["writerFence"] = fence
		docs[id] = d
	}
	fiveDocs := func(w *want) { w.districts = 5 }

	cases := []struct {
		name   string
		damage func(md, mf map[string]any, docs map[string]map[string]any)
		want   func(w *want)
		// clean: the change leaves a snapshot the checks must accept.
		clean bool
	}{
		{name: "consistent", clean: true},
		{name: "writing: a district stored under the root's fence, not yet recorded", clean: true, want: fiveDocs,
			damage: func(md, _ map[string]any, docs map[string]map[string]any) {
				writtenBy("writing", md, docs)
				stored(docs, unwritten[0], rootFence)
			}},
		{name: "writing: over-claim, a recorded district's document deleted",
			damage: func(md, _ map[string]any, docs map[string]map[string]any) {
				writtenBy("writing", md, docs)
				delete(docs, written[0])
			}},
		{name: "writing: a stray document the root does not record, of another fence", want: fiveDocs,
			damage: func(md, _ map[string]any, docs map[string]map[string]any) {
				writtenBy("writing", md, docs)
				stored(docs, unwritten[0], otherFence)
			}},
		{name: "writing: a stray document the root does not record, without a fence", want: fiveDocs,
			damage: func(md, _ map[string]any, docs map[string]map[string]any) {
				writtenBy("writing", md, docs)
				docs[unwritten[0]] = allDocs[unwritten[0]]
			}},
		{name: "finished: a district stored under the root's fence, not recorded", want: fiveDocs,
			damage: func(md, _ map[string]any, docs map[string]map[string]any) {
				writtenBy("finished", md, docs)
				stored(docs, unwritten[0], rootFence)
			}},
		{name: "metadata.snapshotId is the input's snapshot_id", damage: func(md, _ map[string]any, _ map[string]map[string]any) {
			md["snapshotId"] = in.SnapshotID
		}},
		{name: "manifest.snapshotId is the input's snapshot_id", damage: func(_, mf map[string]any, _ map[string]map[string]any) {
			mf["snapshotId"] = in.SnapshotID
		}},
		{name: "status writing", damage: func(md, _ map[string]any, _ map[string]map[string]any) {
			md["status"] = "writing"
		}},
		{name: "manifest entry pending", damage: func(_, mf map[string]any, _ map[string]map[string]any) {
			e := entry(mf, unwritten[0])
			e["status"] = "pending"
			delete(e, "errorMessage")
		}},
		{name: "listed district without a document", damage: func(_, _ map[string]any, docs map[string]map[string]any) {
			delete(docs, written[0])
		}},
		{name: "document of a district the manifest says failed", damage: func(_, _ map[string]any, docs map[string]map[string]any) {
			docs[unwritten[0]] = allDocs[unwritten[0]]
		}},
		{name: "manifest count off", damage: func(_, mf map[string]any, _ map[string]map[string]any) {
			mf["successfulDistricts"] = int64(5)
		}},
		{name: "failed entry without errorMessage", damage: func(_, mf map[string]any, _ map[string]map[string]any) {
			delete(entry(mf, unwritten[1]), "errorMessage")
		}},
		{name: "failedDistricts names a stored district", damage: func(md, _ map[string]any, _ map[string]map[string]any) {
			md["failedDistricts"] = append(md["failedDistricts"].([]any), written[0])
		}},
		{name: "failedDistricts misses an unwritten district", damage: func(md, _ map[string]any, _ map[string]map[string]any) {
			md["failedDistricts"] = []any{unwritten[0]}
		}},
		{name: "writeFailedDistricts empty on a partial snapshot", damage: func(md, _ map[string]any, _ map[string]map[string]any) {
			md["writeFailedDistricts"] = []any{}
		}},
		{name: "district data not a map", damage: func(_, _ map[string]any, docs map[string]map[string]any) {
			docs[written[1]]["data"] = "gone"
		}},
		{name: "district data altered", damage: func(_, _ map[string]any, docs map[string]map[string]any) {
			docs[written[1]]["data"] = map[string]any{"districtId": written[1]}
		}},
		{name: "writeComplete true on a partial snapshot", damage: func(md, _ map[string]any, _ map[string]map[string]any) {
			md["writeComplete"] = true
		}},
		{name: "status success on a partial snapshot", damage: func(md, _ map[string]any, _ map[string]map[string]any) {
			md["status"] = "success"
		}},
		{name: "our writeState missing", want: func(w *want) { w.writeState = "finished" }},
		{name: "our inputSnapshotId missing", want: func(w *want) { w.inputSnapshotID = in.SnapshotID }},
		{name: "not-written message differs", want: func(w *want) { w.unwrittenMessage = "not written yet" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newProject(t)
			root, docs := appFixture(date, in, written, "partial", false)
			for id, d := range docs { // district documents of their own, to damage
				cp := make(map[string]any, len(d))
				for k, v := range d {
					cp[k] = v
				}
				docs[id] = cp
			}
			w := base
			if tc.damage != nil {
				tc.damage(root["metadata"].(map[string]any), root["manifest"].(map[string]any), docs)
			}
			if tc.want != nil {
				tc.want(&w)
			}
			putFixture(t, c.client, date, root, docs)
			_, problems, _ := inspect(context.Background(), c.client, date, w)
			switch {
			case tc.clean && len(problems) > 0:
				t.Errorf("a consistent snapshot is reported: %q", problems)
			case !tc.clean && len(problems) == 0:
				t.Errorf("the damage is not reported")
			default:
				t.Logf("reported: %q", problems)
			}
		})
	}
}

// entry is the manifest entry of district id.
func entry(mf map[string]any, id string) map[string]any {
	for _, x := range mf["districts"].([]any) {
		if e := x.(map[string]any); e["districtId"] == id {
			return e
		}
	}
	panic("no manifest entry for district " + id)
}
