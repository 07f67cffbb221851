package firestorelock

// Compatibility with SyncGuard's Firestore layout, checked on
// the raw documents with the plain Firestore client. What TestRawLayout and
// TestForeignDocuments already cover is not repeated here: the NFC/NFD pair
// sharing one lock doc with exact field types, and foreign documents whose
// times are doubles (live blocks, expired is taken over with counter+1,
// the tolerance edge). This file adds keys of other shapes and foreign
// documents whose times are integers, as SyncGuard's Node client writes
// Date.now()-based values.

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"golang.org/x/text/unicode/norm"

	"github.com/snapwriter/snapwriter/locking"
)

var compatLockIDForm = regexp.MustCompile(`^[A-Za-z0-9_-]{22}$`)

// compatCheckLayout checks the raw lock and fence documents of key, as
// SyncGuard lays them out: lock doc id = NFC(key) (makeStorageKey("",
// key, 1500, 0) for keys this short), fields lockId (string), expiresAtMs
// and acquiredAtMs (integers), key (the caller's key), fence (15-digit
// string) and nothing else; fence doc id "fence:"+lockDocId with fence and
// keyDebug and nothing else.
func compatCheckLayout(t *testing.T, c *firestore.Client, key string, r locking.AcquireResult, wantFence string) {
	t.Helper()
	ctx := context.Background()
	docID := norm.NFC.String(key)
	if len(docID) > maxDocIDBytes {
		t.Fatalf("test key too long for the unhashed id: %d bytes", len(docID))
	}
	snap, err := c.Collection(DefaultLockCollection).Doc(docID).Get(ctx)
	if err != nil {
		t.Fatalf("lock doc %q: %v", docID, err)
	}
	d := snap.Data()
	if len(d) != 5 {
		t.Errorf("lock doc has %d fields, want 5: %v", len(d), compatFieldNames(d))
	}
	if v, ok := d["lockId"].(string); !ok || v != r.LockID || !compatLockIDForm.MatchString(v) {
		t.Errorf("lockId = %#v (%T)", d["lockId"], d["lockId"])
	}
	exp, ok1 := d["expiresAtMs"].(int64)
	acq, ok2 := d["acquiredAtMs"].(int64)
	if !ok1 || !ok2 {
		t.Errorf("expiresAtMs is %T, acquiredAtMs is %T; want integers", d["expiresAtMs"], d["acquiredAtMs"])
	} else if exp != r.ExpiresAt.UnixMilli() || exp <= acq {
		t.Errorf("expiresAtMs %d, acquiredAtMs %d, reported expiry %d", exp, acq, r.ExpiresAt.UnixMilli())
	}
	if v, ok := d["key"].(string); !ok || v != key {
		t.Errorf("key field = %#v, want the caller's key", d["key"])
	}
	if v, ok := d["fence"].(string); !ok || v != wantFence || v != r.Fence || !fenceForm.MatchString(v) {
		t.Errorf("fence = %#v (%T), want %q", d["fence"], d["fence"], wantFence)
	}

	fsnap, err := c.Collection(DefaultFenceCollection).Doc("fence:" + docID).Get(ctx)
	if err != nil {
		t.Fatalf("fence doc %q: %v", "fence:"+docID, err)
	}
	f := fsnap.Data()
	if len(f) != 2 {
		t.Errorf("fence doc has %d fields, want 2: %v", len(f), compatFieldNames(f))
	}
	if v, ok := f["fence"].(string); !ok || v != wantFence {
		t.Errorf("counter fence = %#v (%T), want %q", f["fence"], f["fence"], wantFence)
	}
	if v, ok := f["keyDebug"].(string); !ok || v != key {
		t.Errorf("keyDebug = %#v, want the caller's key", f["keyDebug"])
	}
}

func compatFieldNames(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Keys of several shapes land on the documents SyncGuard would use, with
// its field names and types.
func TestCompatLayoutKeyShapes(t *testing.T) {
	t.Parallel()
	emoji := "\U0001F512" // 4 bytes in UTF-8
	cases := []struct{ name, key string }{
		{"ascii", "snapshot:2026-11-20"},
		{"ascii punctuation", "tenant-7.jobs_nightly:run#1 (retry)"},
		{"emoji", "lock:" + emoji + "\U0001F468\u200D\U0001F469\u200D\U0001F467"},
		{"512 ascii bytes", strings.Repeat("k", locking.MaxKeyBytes)},
		{"512 bytes of 4-byte runes", strings.Repeat(emoji, locking.MaxKeyBytes/4)},
		// 600 bytes as spelled, 400 after NFC: the limit applies to the
		// normalised key, and the doc id is the NFC form.
		{"NFD over 512 bytes, NFC under", strings.Repeat("e\u0301", 200)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, c := newBackend(t)
			r := mustAcquire(t, b, tc.key, time.Minute)
			compatCheckLayout(t, c, tc.key, r, "000000000000001")
			if n := len(docs(t, c, DefaultLockCollection)); n != 1 {
				t.Errorf("%d lock docs, want 1", n)
			}
			// Release deletes the lock doc and keeps the counter; the next
			// acquire continues it.
			if ok, err := b.Release(context.Background(), r.LockID); !ok || err != nil {
				t.Fatalf("release: %v, %v", ok, err)
			}
			if n := len(docs(t, c, DefaultLockCollection)); n != 0 {
				t.Errorf("%d lock docs after release", n)
			}
			r2 := mustAcquire(t, b, tc.key, time.Minute)
			compatCheckLayout(t, c, tc.key, r2, "000000000000002")
		})
	}
	t.Run("513 bytes refused before any write", func(t *testing.T) {
		t.Parallel()
		b, c := newBackend(t)
		if r, err := b.Acquire(context.Background(), strings.Repeat("k", locking.MaxKeyBytes+1), time.Minute); r.OK || err == nil {
			t.Errorf("acquire of a 513-byte key: %+v, %v", r, err)
		}
		if n := len(docs(t, c, DefaultLockCollection)) + len(docs(t, c, DefaultFenceCollection)); n != 0 {
			t.Errorf("%d docs written", n)
		}
	})
}

// An NFD spelling acquired first still lands on the NFC doc id, and the NFC
// spelling then sees the same lock and counter (TestRawLayout checks the
// fields; this checks the counter is shared across spellings over time).
func TestCompatNFCNFDShareCounter(t *testing.T) {
	t.Parallel()
	b, c := newBackend(t)
	ctx := context.Background()
	nfd, nfc := "job:Cafe\u0301-\u1100\u1161", "job:Caf\u00e9-\uac00" // Latin and Hangul decompositions
	if norm.NFC.String(nfd) != nfc {
		t.Fatal("test keys are not an NFC/NFD pair")
	}
	r := mustAcquire(t, b, nfd, time.Minute)
	compatCheckLayout(t, c, nfd, r, "000000000000001")
	if ok, err := b.Release(ctx, r.LockID); !ok || err != nil {
		t.Fatal(ok, err)
	}
	r = mustAcquire(t, b, nfc, time.Minute)
	compatCheckLayout(t, c, nfc, r, "000000000000002")
	if ids := docs(t, c, DefaultFenceCollection); len(ids) != 1 || ids[0].Ref.ID != "fence:"+nfc {
		t.Errorf("fence docs: %d", len(ids))
	}
}

// Foreign documents with integer times, as SyncGuard's Node client writes
// them (Date.now() + ttlMs are safe integers, stored as integerValue): a
// live one blocks, an expired one is taken over with counter+1 and
// rewritten in our layout; a counter alone is continued.
func TestCompatForeignIntegerTimes(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.UnixMilli(1_800_000_000_000)}
	b, c := newBackend(t, WithClock(clk.Now))
	ctx := context.Background()
	now := clk.Now().UnixMilli()
	seed := func(key, lockID string, expires int64, fence string) {
		t.Helper()
		id := norm.NFC.String(key)
		if _, err := c.Collection("locks").Doc(id).Set(ctx, map[string]any{
			"lockId": lockID, "expiresAtMs": expires, "acquiredAtMs": now - 30_000, "key": key, "fence": fence,
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Collection("fence_counters").Doc("fence:"+id).Set(ctx, map[string]any{"fence": fence, "keyDebug": key}); err != nil {
			t.Fatal(err)
		}
	}
	liveID, expiredID, nfdID := "LLLLLLLLLLLLLLLLLLLLLL", "XXXXXXXXXXXXXXXXXXXXXX", "NNNNNNNNNNNNNNNNNNNNNN"
	seed("live", liveID, now+60_000, "000000000000007")
	seed("expired", expiredID, now-1001, "000000000000007") // just past the 1 s tolerance
	seed("edge", "EEEEEEEEEEEEEEEEEEEEEE", now-1000+1, "000000000000007")
	// A foreign client that wrote the NFD key (doc id NFC, key as spelled).
	seed("k:e\u0301", nfdID, now+60_000, "000000000000003")

	for _, k := range []string{"live", "edge", "k:\u00e9", "k:e\u0301"} {
		if r, err := b.Acquire(ctx, k, time.Minute); r.OK || err != nil {
			t.Errorf("acquired %q over a live foreign lock: %+v, %v", k, r, err)
		}
	}
	if info, err := b.LookupKey(ctx, "k:\u00e9"); err != nil || info == nil || info.LockIDHash != locking.HashKey(nfdID) ||
		info.Fence != "000000000000003" || info.ExpiresAt.UnixMilli() != now+60_000 || info.AcquiredAt.UnixMilli() != now-30_000 {
		t.Errorf("lookup of a foreign integer-time lock: %+v, %v", info, err)
	}

	r, err := b.Acquire(ctx, "expired", time.Minute)
	if err != nil || !r.OK || r.Fence != "000000000000008" {
		t.Fatalf("takeover of an expired foreign lock: %+v, %v", r, err)
	}
	compatCheckLayout(t, c, "expired", r, "000000000000008")
	if ok, _ := b.Release(ctx, expiredID); ok {
		t.Error("the expired foreign lockId released the new lock")
	}

	// Only a counter (the foreign lock was released): continue it.
	if _, err := c.Collection("fence_counters").Doc("fence:released").Set(ctx, map[string]any{
		"fence": "000000000000999", "keyDebug": "released"}); err != nil {
		t.Fatal(err)
	}
	r, err = b.Acquire(ctx, "released", time.Minute)
	if err != nil || !r.OK || r.Fence != "000000000001000" {
		t.Fatalf("acquire after a foreign counter: %+v, %v", r, err)
	}
	compatCheckLayout(t, c, "released", r, "000000000001000")

	// The foreign live locks extend and release by lockId, and an extend
	// writes an integer expiry.
	if e, err := b.Extend(ctx, nfdID, 2*time.Minute); !e.OK || err != nil {
		t.Fatalf("extend of a foreign lock: %+v, %v", e, err)
	}
	snap, err := c.Collection("locks").Doc("k:\u00e9").Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := snap.Data()["expiresAtMs"].(int64); !ok || v != now+120_000 {
		t.Errorf("expiresAtMs after extend = %#v (%T)", snap.Data()["expiresAtMs"], snap.Data()["expiresAtMs"])
	}
	if snap.Data()["key"] != "k:e\u0301" || snap.Data()["fence"] != "000000000000003" {
		t.Errorf("extend changed other fields: %v", snap.Data())
	}
	for _, id := range []string{liveID, nfdID} {
		if ok, err := b.Release(ctx, id); !ok || err != nil {
			t.Errorf("release of a foreign live lock: %v, %v", ok, err)
		}
	}
}

// A foreign lock document whose times are doubles with integral values
// (a client that stores every number as a double) reads like integers:
// the document is live exactly while an integer one would be.
func TestCompatForeignIntegralDoubles(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.UnixMilli(1_800_000_000_000)}
	b, c := newBackend(t, WithClock(clk.Now))
	ctx := context.Background()
	now := float64(clk.Now().UnixMilli())
	for key, exp := range map[string]float64{"live": now - 999, "expired": now - 1000} {
		if _, err := c.Collection("locks").Doc(key).Set(ctx, map[string]any{
			"lockId": "DDDDDDDDDDDDDDDDDDDDD" + key[:1], "expiresAtMs": exp, "acquiredAtMs": now - 30_000.0, "key": key, "fence": "000000000000005",
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Collection("fence_counters").Doc("fence:"+key).Set(ctx, map[string]any{"fence": "000000000000005", "keyDebug": key}); err != nil {
			t.Fatal(err)
		}
	}
	if r, err := b.Acquire(ctx, "live", time.Minute); r.OK || err != nil {
		t.Errorf("acquired over a live double-time lock: %+v, %v", r, err)
	}
	r, err := b.Acquire(ctx, "expired", time.Minute)
	if err != nil || !r.OK || r.Fence != "000000000000006" {
		t.Fatalf("takeover of an expired double-time lock: %+v, %v", r, err)
	}
	compatCheckLayout(t, c, "expired", r, "000000000000006")
}
