package snapshot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/option"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/locking/backendkit"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// lockKey is the Firestore lock key of snapshot id in e's project, in the
// default database and collection: the key e's writers take.
func (e *env) lockKey(id string) string {
	e.t.Helper()
	s, err := ScopeOf(e.clean, DefaultCollection)
	if err != nil {
		e.t.Fatal(err)
	}
	k, err := s.LockKey("firestore", id)
	if err != nil {
		e.t.Fatal(err)
	}
	return k
}

// parseLockKey undoes LockScope.LockKey: the parts, unescaped, with a
// hashed part left as it is ("#" and hex). It fails on anything LockKey
// cannot have produced, so a key that parses names exactly one set of
// parts.
func parseLockKey(key string) ([]string, bool) {
	rest, ok := strings.CutPrefix(key, "snapshot:")
	if !ok {
		return nil, false
	}
	parts := strings.Split(rest, ":")
	for i, p := range parts {
		if h, ok := strings.CutPrefix(p, "#"); ok {
			if len(h) != 32 || strings.Trim(h, "0123456789abcdef") != "" {
				return nil, false
			}
			continue
		}
		var b []byte
		for j := 0; j < len(p); j++ {
			switch c := p[j]; {
			case plainKeyByte(c):
				b = append(b, c)
			case c == '%' && j+2 < len(p):
				v, err := hex.DecodeString(p[j+1 : j+3])
				if err != nil || strings.ToUpper(p[j+1:j+3]) != p[j+1:j+3] || plainKeyByte(v[0]) {
					return nil, false // not the canonical escape
				}
				b = append(b, v[0])
				j += 2
			default:
				return nil, false
			}
		}
		parts[i] = string(b)
	}
	return parts, true
}

// partOf is what parseLockKey returns for part p of a key: p, or its
// digest when LockKey hashed it.
func partOf(p string) string {
	if k := keyPart(p); strings.HasPrefix(k, "#") {
		return k
	}
	return p
}

// checkKey fails t unless key is a valid lock key on every backend (NFC,
// at most 512 bytes, a Firestore document id as it is) whose parts are
// want.
func checkKey(t *testing.T, key string, want ...string) {
	t.Helper()
	if len(key) > locking.MaxKeyBytes {
		t.Errorf("key is %d bytes, over %d: %s", len(key), locking.MaxKeyBytes, key)
	}
	if n, err := locking.NormalizeAndValidateKey(key); err != nil || n != key {
		t.Errorf("key %q is not valid as it is: %q, %v", key, n, err)
	}
	if id, err := backendkit.MakeStorageKey("", key, 1500, 0); err != nil || id != key {
		t.Errorf("key %q is not its own Firestore document id: %q, %v", key, id, err)
	}
	got, ok := parseLockKey(key)
	if !ok || len(got) != len(want) {
		t.Fatalf("key %q parses as %q (%v), want %d parts", key, got, ok, len(want))
	}
	for i := range want {
		if got[i] != partOf(want[i]) {
			t.Errorf("key %q: part %d is %q, want %q", key, i, got[i], partOf(want[i]))
		}
	}
}

func TestLockKeyFormat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		backend string
		scope   LockScope
		id      string
		want    string
	}{
		{"firestore", LockScope{"my-project", "(default)", "snapshots"}, day, "snapshot:(default):snapshots:2026-11-20"},
		{"firestore", LockScope{"", "", "snapshots"}, day, "snapshot:(default):snapshots:2026-11-20"},
		{"firestore", LockScope{"p", "stats-eu", "snapshots_v2"}, day, "snapshot:stats-eu:snapshots_v2:2026-11-20"},
		{"postgres", LockScope{"my-project", "(default)", "snapshots"}, day, "snapshot:my-project:(default):snapshots:2026-11-20"},
		{"postgres", LockScope{"example.com:stats", "(default)", "snapshots"}, day, "snapshot:example.com%3Astats:(default):snapshots:2026-11-20"},
		{"firestore", LockScope{"p", "(default)", "daily:eu"}, day, "snapshot:(default):daily%3Aeu:2026-11-20"},
		{"firestore", LockScope{"p", "(default)", "50% off #1"}, day, "snapshot:(default):50%25%20off%20%231:2026-11-20"},
		{"firestore", LockScope{"p", "(default)", "café"}, day, "snapshot:(default):caf%C3%A9:2026-11-20"},
		{"firestore", LockScope{"p", "(default)", "cafe\u0301"}, day, "snapshot:(default):cafe%CC%81:2026-11-20"},
		// Any other backend may be shared by projects, like PostgreSQL.
		{"redis", LockScope{"p", "(default)", "s"}, day, "snapshot:p:(default):s:2026-11-20"},
	} {
		got, err := tc.scope.LockKey(tc.backend, tc.id)
		if err != nil || got != tc.want {
			t.Errorf("%+v.LockKey(%q, %q) = %q, %v; want %q", tc.scope, tc.backend, tc.id, got, err, tc.want)
			continue
		}
		parts := []string{tc.scope.Database, tc.scope.Collection, tc.id}
		if parts[0] == "" {
			parts[0] = "(default)"
		}
		if tc.backend != "firestore" {
			parts = append([]string{tc.scope.Project}, parts...)
		}
		checkKey(t, got, parts...)
	}
	if got := LegacyLockKey(day); got != "snapshot:2026-11-20" {
		t.Errorf("LegacyLockKey = %q", got)
	}
}

// Scopes that a plain "a:b:c" join would confuse get distinct keys, and
// every key parses back to its own parts.
func TestLockKeyUnambiguous(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("c", 300)
	type in struct {
		backend string
		scope   LockScope
		id      string
	}
	ins := []in{
		{"firestore", LockScope{"", "(default)", "a:b"}, day},
		{"firestore", LockScope{"", "(default):a", "b"}, day},
		{"firestore", LockScope{"", "(default)", "a"}, "b:" + day},
		{"firestore", LockScope{"", "(default)", "a%3Ab"}, day},
		{"firestore", LockScope{"", "(default)", "a%3ab"}, day},
		{"firestore", LockScope{"", "(default)", "café"}, day},
		{"firestore", LockScope{"", "(default)", "cafe\u0301"}, day},
		{"firestore", LockScope{"", "(default)", "#" + hex.EncodeToString(make([]byte, 16))}, day},
		{"firestore", LockScope{"", "(default)", long}, day},
		{"firestore", LockScope{"", "(default)", long + "d"}, day},
		{"firestore", LockScope{"", "(default)", strings.Repeat("x", maxKeyPart)}, day},
		{"firestore", LockScope{"", "(default)", strings.Repeat("x", maxKeyPart+1)}, day},
		{"firestore", LockScope{"", "(default)", "snapshots"}, day},
		{"firestore", LockScope{"", "(default)", "snapshots"}, "2026-11-21"},
		{"firestore", LockScope{"", "other", "snapshots"}, day},
		{"postgres", LockScope{"p:x", "d", "c"}, day},
		{"postgres", LockScope{"p", "x:d", "c"}, day},
		{"postgres", LockScope{"p", "(default)", "snapshots"}, day},
		{"postgres", LockScope{"q", "(default)", "snapshots"}, day},
		{"postgres", LockScope{"p", "(default)", "snapshots:b"}, day},
	}
	seen := map[string]in{}
	for _, x := range ins {
		k, err := x.scope.LockKey(x.backend, x.id)
		if err != nil {
			t.Fatalf("%+v: %v", x, err)
		}
		if prev, dup := seen[k]; dup {
			t.Errorf("%+v and %+v share the key %q", prev, x, k)
		}
		seen[k] = x
		parts := []string{x.scope.Database, x.scope.Collection, x.id}
		if x.backend != "firestore" {
			parts = append([]string{x.scope.Project}, parts...)
		}
		checkKey(t, k, parts...)
	}
	if k := keyPart(strings.Repeat("x", maxKeyPart)); k != strings.Repeat("x", maxKeyPart) {
		t.Errorf("a part of exactly %d bytes was hashed: %q", maxKeyPart, k)
	}
	if k := keyPart(strings.Repeat(":", maxKeyPart/3)); k != strings.Repeat("%3A", maxKeyPart/3) {
		t.Errorf("a part escaping to exactly %d bytes was hashed: %q", maxKeyPart, k)
	}
	sum := sha256.Sum256([]byte(long))
	if k := keyPart(long); k != "#"+hex.EncodeToString(sum[:16]) {
		t.Errorf("long part %q", k)
	}
}

// The longest legal names give keys within every limit: projects of 30
// characters (and domain-scoped ones, which hold ":"), database ids of 63,
// collection ids of 1,500 UTF-8 bytes in any script — and arbitrary ones
// the emulator takes.
func TestLockKeyLimits(t *testing.T) {
	t.Parallel()
	project := "p" + strings.Repeat("a", 28) + "9"
	domainProject := strings.Repeat("d", 59) + ".com:" + project
	database := "d" + strings.Repeat("b", 61) + "9"
	var collections []string
	for _, r := range []string{"c", "é", "€", "😀", ":", "%", "\x7f"} {
		collections = append(collections, strings.Repeat(r, 1500/len(r)))
	}
	// Parts of exactly maxKeyPart bytes make the longest keys.
	atLimit := strings.Repeat("x", maxKeyPart)
	collections = append(collections, "__snapshots__", ".", "..", "a b\tc", atLimit)
	longest := 0
	for _, p := range []string{project, domainProject, strings.Repeat("p", 1500), atLimit} {
		for _, db := range []string{"(default)", database, strings.Repeat("😀", 375), atLimit} {
			for _, c := range collections {
				for _, id := range []string{day, strings.Repeat("i", 1500), atLimit} {
					for _, backend := range []string{"firestore", "postgres"} {
						s := LockScope{p, db, c}
						k, err := s.LockKey(backend, id)
						if err != nil {
							t.Fatalf("%q %q %q %q: %v", backend, p, db, c, err)
						}
						longest = max(longest, len(k))
						want := []string{db, c, id}
						if backend == "postgres" {
							want = append([]string{p}, want...)
						}
						checkKey(t, k, want...)
						if strings.Contains(k, "/") || !utf8.ValidString(k) {
							t.Errorf("key %q", k)
						}
					}
				}
			}
		}
	}
	if want := len("snapshot:") + 4*maxKeyPart + 3; longest != want || longest > locking.MaxKeyBytes {
		t.Errorf("longest key %d bytes, want %d (within %d)", longest, want, locking.MaxKeyBytes)
	}
	// Real names stay readable.
	k, _ := LockScope{domainProject, database, "snapshots"}.LockKey("postgres", day)
	if !strings.Contains(k, strings.ReplaceAll(domainProject, ":", "%3A")) || !strings.Contains(k, database) {
		t.Errorf("longest legal project and database were not kept readable: %s", k)
	}
}

func TestLockKeyErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		backend string
		scope   LockScope
		id      string
		msg     string
	}{
		{"firestore", LockScope{"p", "(default)", ""}, day, "invalid collection"},
		{"firestore", LockScope{"p", "(default)", "a/b"}, day, "invalid collection"},
		{"firestore", LockScope{"p", "(default)", "s"}, "", "empty snapshot id"},
		{"postgres", LockScope{"", "(default)", "s"}, day, "project is unknown"},
	} {
		if k, err := tc.scope.LockKey(tc.backend, tc.id); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%+v.LockKey(%q, %q) = %q, %v; want an error saying %q", tc.scope, tc.backend, tc.id, k, err, tc.msg)
		}
	}
	// Firestore locks live in the project: it need not be known.
	if _, err := (LockScope{"", "(default)", "s"}).LockKey("firestore", day); err != nil {
		t.Error(err)
	}
}

// ScopeOf reads the project and database the client addresses.
func TestScopeOf(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s, err := ScopeOf(e.clean, "daily:eu")
	if err != nil || s != (LockScope{e.project, "(default)", "daily:eu"}) {
		t.Errorf("ScopeOf = %+v, %v", s, err)
	}
	for _, tc := range []struct{ project, database string }{
		{"example.com:stats", "stats-eu"},
		{"p-1", "(default)"},
	} {
		conn, err := emu.Dial()
		if err != nil {
			t.Fatal(err)
		}
		c, err := firestore.NewClientWithDatabase(context.Background(), tc.project, tc.database,
			option.WithGRPCConn(conn), option.WithoutAuthentication())
		if err != nil {
			t.Fatal(err)
		}
		s, err := ScopeOf(c, "snapshots")
		if err != nil || s != (LockScope{tc.project, tc.database, "snapshots"}) {
			t.Errorf("ScopeOf(%s, %s) = %+v, %v", tc.project, tc.database, s, err)
		}
		_ = c.Close()
	}
	if _, err := ScopeOf(e.clean, "a/b"); err == nil {
		t.Error("ScopeOf accepted a collection path")
	}
	if _, err := ScopeOf(nil, "s"); err == nil {
		t.Error("ScopeOf accepted no client")
	}
}

// Whatever the names, a key is valid on every backend and parses back to
// exactly its parts, so two snapshots never share a key (but for SHA-256
// collisions of hashed parts).
func FuzzLockKey(f *testing.F) {
	f.Add("my-project", "(default)", "snapshots", day)
	f.Add("example.com:p", "db", "a:b%3A#c", day)
	f.Add("", "", "café", "x")
	f.Add("p", "(default)", strings.Repeat("😀:", 200), day)
	f.Fuzz(func(t *testing.T, project, database, collection, id string) {
		if collection == "" || strings.Contains(collection, "/") || id == "" {
			return
		}
		for _, backend := range []string{"firestore", "postgres"} {
			s := LockScope{project, database, collection}
			k, err := s.LockKey(backend, id)
			if backend == "postgres" && project == "" {
				if err == nil {
					t.Fatalf("no error for an unknown project: %q", k)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if database == "" {
				database = "(default)"
			}
			want := []string{database, collection, id}
			if backend == "postgres" {
				want = append([]string{project}, want...)
			}
			checkKey(t, k, want...)
		}
	})
}

// Writers of one date into two collections (one named with ":") hold
// different keys and never exclude each other, even with no lock wait;
// writers of the same collection and date still do.
func TestLockKeyCollectionsDoNotExclude(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	inChunks, resume := make(chan struct{}), make(chan struct{})
	a := e.writer(withBeforeChunks(func(context.Context) { close(inChunks); <-resume }))
	errc := make(chan error, 1)
	go func() { _, err := a.Write(ctx, day, gen(5, 1)); errc <- err }()
	<-inChunks // a holds its lock

	for _, coll := range []string{"snapshots_b", "snapshots:b"} {
		mustWrite(t, e.writer(WithCollection(coll)), day, gen(4, 2))
		if got, err := NewReader(e.clean, coll).Get(ctx, day); err != nil || len(got.Payload.Districts) != 4 {
			t.Errorf("collection %s: %v", coll, err)
		}
	}
	_, err := e.writer().Write(ctx, day, gen(3, 3))
	if !errors.Is(err, ErrLockHeld) {
		t.Errorf("a second writer of the same collection and date: %v, want ErrLockHeld", err)
	}
	close(resume)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if ids := e.stored(day); len(ids) != 5 {
		t.Errorf("first writer's districts: %v", ids)
	}
	if got, want := e.rootData(day)["metadata"].(map[string]any)["writerLockKeyHash"], locking.HashKey(e.lockKey(day)); got != want {
		t.Errorf("root records writerLockKeyHash %v, want %s", got, want)
	}
}

// makeLegacy turns the root of id into one a snapwriter from before keys
// named the document left: no writerLockKeyHash, and a fence from the old
// key's counter, which it first moves to 7 as seven writes would have.
func (e *env) makeLegacy(id string, updates ...firestore.Update) string {
	e.t.Helper()
	ctx := context.Background()
	var fence string
	for range 7 {
		r, err := e.locker().Acquire(ctx, LegacyLockKey(id), time.Minute)
		if err != nil || !r.OK {
			e.t.Fatal(r, err)
		}
		if _, err := e.locker().Release(ctx, r.LockID); err != nil {
			e.t.Fatal(err)
		}
		fence = r.Fence
	}
	e.setRoot(id, append([]firestore.Update{{Path: "metadata.writerFence", Value: fence},
		{Path: "metadata.writerLockKeyHash", Value: firestore.Delete}}, updates...)...)
	return fence
}

func (e *env) rootWriter(id string) (fence, keyHash string) {
	e.t.Helper()
	md := e.rootData(id)["metadata"].(map[string]any)
	fence, _ = md["writerFence"].(string)
	keyHash, _ = md["writerLockKeyHash"].(string)
	return fence, keyHash
}

// The upgrade: a root written under the old key "snapshot:<date>" carries
// a fence of that key's counter (7 here), which the new key's counter (at
// 2 or 3) is below. Comparing them would fence every new writer out; the
// root instead says which key issued its fence, and a root that says none
// is replaced once — unless a writer of the old version holds the old key,
// which is ErrLockHeld with the root untouched. From then on, fences of the
// new key compare as always.
func TestLegacyRootUpgrade(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	mustWrite(t, e.writer(), day, gen(5, 1))
	legacyFence := e.makeLegacy(day)
	if legacyFence != "000000000000007" {
		t.Fatalf("legacy fence %s", legacyFence)
	}

	// A writer of the old version is at work on the snapshot.
	old, err := e.locker().Acquire(ctx, LegacyLockKey(day), time.Minute)
	if err != nil || !old.OK {
		t.Fatal(old, err)
	}
	_, err = e.writer().Write(ctx, day, gen(6, 2))
	if !errors.Is(err, ErrLockHeld) || errors.Is(err, ErrRootFailed) || !strings.Contains(err.Error(), "earlier snapwriter version") ||
		strings.Contains(err.Error(), LegacyLockKey(day)) {
		t.Fatalf("write beside a live old-version writer: %v; want ErrLockHeld naming it (by hash only)", err)
	}
	if f, h := e.rootWriter(day); f != legacyFence || h != "" {
		t.Errorf("refused write changed the root: fence %s, key hash %q", f, h)
	}
	if got := e.get(day); len(got.Payload.Districts) != 5 {
		t.Errorf("refused write changed the snapshot: %d districts", len(got.Payload.Districts))
	}
	if _, err := e.locker().Release(ctx, old.LockID); err != nil {
		t.Fatal(err)
	}

	// The old writer has stopped: the new writer's fence 3 (the refused
	// attempt took 2) replaces the root whose fence is 7.
	in := gen(6, 2)
	res := mustWrite(t, e.writer(), day, in)
	if res.Fence != "000000000000003" {
		t.Errorf("fence %s, want 3", res.Fence)
	}
	if f, h := e.rootWriter(day); f != res.Fence || h != locking.HashKey(e.lockKey(day)) {
		t.Errorf("root records fence %s key hash %q; want %s and our key's hash", f, h, res.Fence)
	}
	if got := e.get(day); !model.Equal(got, in) {
		t.Error("read back differs from the new write")
	}
	// Once: fences compare again. A newer fence of our key wins...
	e.setRoot(day, firestore.Update{Path: "metadata.writerFence", Value: "000000000000050"})
	if _, err := e.writer().Write(ctx, day, gen(6, 3)); !errors.Is(err, ErrFencedOut) {
		t.Errorf("stale fence of the new key: %v, want ErrFencedOut", err)
	}
	// ...and an older one loses.
	e.setRoot(day, firestore.Update{Path: "metadata.writerFence", Value: "000000000000001"})
	mustWrite(t, e.writer(), day, gen(6, 4))
}

// Repair takes a legacy root over the same way, and records its key.
func TestLegacyRootRepair(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	in := gen(120, 1)
	e.deny(in.Payload.Districts[70].DistrictID)
	mustPartial(t)(e.writer().Write(ctx, day, in))
	e.f.setRule(nil)
	e.makeLegacy(day)

	rep, err := e.writer().Repair(ctx, day, in)
	if err != nil || rep.Outcome != OutcomeComplete {
		t.Fatalf("repair of a legacy root: %+v, %v", rep, err)
	}
	if f, h := e.rootWriter(day); f != rep.Fence || h != locking.HashKey(e.lockKey(day)) {
		t.Errorf("repaired root records fence %s key hash %q; want %s and our key's hash", f, h, rep.Fence)
	}
	if got := e.get(day); !model.Equal(got, in) {
		t.Error("read back differs after the repair")
	}
}

// A root whose fence another key issued (another snapwriter's key form)
// is refused like one of another backend, unless the switch is allowed.
func TestForeignLockKeyRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	mustWrite(t, e.writer(), day, gen(5, 1))
	const foreign = "0123456789abcdef01234567"
	e.setRoot(day, firestore.Update{Path: "metadata.writerLockKeyHash", Value: foreign})
	_, err := e.writer().Write(ctx, day, gen(6, 2))
	var se *Error
	if !errors.Is(err, ErrLockKeySwitch) || !strings.Contains(err.Error(), foreign) || !errors.As(err, &se) || !errors.Is(se, ErrLockKeySwitch) || se.ID != day {
		t.Fatalf("write over a foreign key's root: %v; want ErrLockKeySwitch, an *Error of kind LockKeySwitch for %s", err, day)
	}
	if _, h := e.rootWriter(day); h != foreign {
		t.Errorf("refused write changed the root's key hash to %q", h)
	}
	mustWrite(t, e.writer(WithAllowLockBackendSwitch(true)), day, gen(6, 2))
	if _, h := e.rootWriter(day); h != locking.HashKey(e.lockKey(day)) {
		t.Errorf("after the allowed switch the root records %q", h)
	}
}

// List tells a live writer from a dead one by the key the root's writer
// held: the old key for a legacy root, ours for ours; a key it cannot name
// is unknown.
func TestReaderLivenessLegacyRoot(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	locker := e.locker()
	live := NewReader(e.clean, "", WithLockBackends(locker))
	mustWrite(t, e.writer(), day, gen(5, 1))
	writing := []firestore.Update{{Path: "metadata.writeState", Value: layout.StateWriting}, {Path: "metadata.writeComplete", Value: false}}
	e.setRoot(day, writing...)
	if st := states(t, live, day); st != StateInterrupted {
		t.Errorf("our root, no lock: %s, want interrupted", st)
	}
	hold := func(key string) func() {
		r, err := locker.Acquire(ctx, key, time.Minute)
		if err != nil || !r.OK {
			t.Fatal(r, err)
		}
		return func() {
			if _, err := locker.Release(ctx, r.LockID); err != nil {
				t.Fatal(err)
			}
		}
	}
	release := hold(e.lockKey(day))
	if st := states(t, live, day); st != StateWriting {
		t.Errorf("our root, our key held: %s, want writing", st)
	}
	e.makeLegacy(day)
	if st := states(t, live, day); st != StateInterrupted {
		t.Errorf("legacy root, only the new key held: %s, want interrupted", st)
	}
	release()
	release = hold(LegacyLockKey(day))
	if st := states(t, live, day); st != StateWriting {
		t.Errorf("legacy root, old key held: %s, want writing", st)
	}
	release()
	e.setRoot(day, firestore.Update{Path: "metadata.writerLockKeyHash", Value: "0123456789abcdef01234567"})
	if st := states(t, live, day); st != StateUnknown {
		t.Errorf("root of a key the reader cannot name: %s, want unknown", st)
	}
}
