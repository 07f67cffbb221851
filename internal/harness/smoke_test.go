package harness

import "testing"

// A mark covers the test and its subtests, and no other test, even one
// whose name it begins.
func TestIsSmokeCoversSubtests(t *testing.T) {
	smoke.Store(t.Name()+"/marked", true)
	t.Cleanup(func() { smoke.Delete(t.Name() + "/marked") })
	if IsSmoke(t) {
		t.Error("the parent of a marked test counts as marked")
	}
	t.Run("marked", func(t *testing.T) {
		if !IsSmoke(t) {
			t.Error("a marked test does not count as marked")
		}
		t.Run("sub", func(t *testing.T) {
			if !IsSmoke(t) {
				t.Error("the subtest of a marked test does not count as marked")
			}
		})
	})
	t.Run("markedness", func(t *testing.T) {
		if IsSmoke(t) {
			t.Error("a test whose name begins with a marked one's counts as marked")
		}
	})
}
