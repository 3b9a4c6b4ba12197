package records

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSignVerify(t *testing.T) {
	now := time.Now()
	k, _ := NewKey(now)
	ring := NewKeyring([]Key{k}, now, 0)
	sig := ring.Sign("p", []byte("claims"))
	if ok, current, known := ring.Verify("p", []byte("claims"), sig); !ok || !current || !known {
		t.Fatalf("own signature: ok %v current %v known %v", ok, current, known)
	}
	for _, tc := range []struct {
		name, purpose, claims, sig string
	}{
		{"other claims", "p", "claimz", sig},
		{"other purpose", "q", "claims", sig},
		// The length prefixes keep purpose and claims apart.
		{"purpose and claims shifted", "pc", "laims", sig},
		{"no signature", "p", "claims", ""},
		{"garbled", "p", "claims", sig + "x"},
	} {
		if ok, _, _ := ring.Verify(tc.purpose, []byte(tc.claims), tc.sig); ok {
			t.Errorf("%s: verified", tc.name)
		}
	}
	other, _ := NewKey(now)
	if ok, _, known := NewKeyring([]Key{other}, now, 0).Verify("p", []byte("claims"), sig); ok || known {
		t.Errorf("another install's ring: ok %v known %v", ok, known)
	}
	// Another key under this key's name does not verify.
	other.ID = k.ID
	if ok, _, _ := NewKeyring([]Key{other}, now, 0).Verify("p", []byte("claims"), sig); ok {
		t.Error("a key of the same name but other bytes verified")
	}
}

// A rotation signs with the new key only once every replica has had a
// grace period to load it, and verifies with the previous ones until
// Keep-1 newer keys were added.
func TestRotation(t *testing.T) {
	o := Options{RotateEvery: time.Hour, Keep: 3, Grace: time.Minute}
	t0 := time.Unix(1_000_000, 0)
	keys, changed, wake, err := Plan(nil, t0, o)
	if err != nil || !changed || len(keys) != 1 || !wake.Equal(t0.Add(time.Hour)) {
		t.Fatalf("bootstrap: %v %v %v %v", len(keys), changed, wake, err)
	}
	if _, changed, _, _ := Plan(keys, t0.Add(59*time.Minute), o); changed {
		t.Fatal("rotated before RotateEvery")
	}
	first := NewKeyring(keys, t0, o.Grace)
	sig := first.Sign("p", []byte("c"))

	t1 := t0.Add(time.Hour)
	keys, changed, _, _ = Plan(keys, t1, o)
	if !changed || len(keys) != 2 {
		t.Fatalf("rotation: %d keys, changed %v", len(keys), changed)
	}
	during := NewKeyring(keys, t1.Add(30*time.Second), o.Grace)
	if during.Sign("p", []byte("c")) != sig {
		t.Fatal("the new key signs before its grace period")
	}
	after := NewKeyring(keys, t1.Add(o.Grace), o.Grace)
	if after.Sign("p", []byte("c")) == sig {
		t.Fatal("the new key does not sign after its grace period")
	}
	if ok, current, _ := after.Verify("p", []byte("c"), sig); !ok || current {
		t.Fatalf("the previous key's record: ok %v current %v (want verified, not current)", ok, current)
	}
	keys, _, _, _ = Plan(keys, t1.Add(time.Hour), o)
	if ok, _, _ := NewKeyring(keys, t1.Add(time.Hour), o.Grace).Verify("p", []byte("c"), sig); !ok {
		t.Fatal("a record two rotations old no longer verifies with Keep 3")
	}
	keys, _, _, _ = Plan(keys, t1.Add(2*time.Hour), o)
	if len(keys) != 3 {
		t.Fatalf("%d keys kept, want 3", len(keys))
	}
	if ok, _, _ := NewKeyring(keys, t1.Add(2*time.Hour), o.Grace).Verify("p", []byte("c"), sig); ok {
		t.Fatal("a record of a dropped key still verifies")
	}
}

// Two replicas bootstrapping at once each add a key; both sign with the
// same one (the oldest while all are in their grace period), and both
// verify the other's.
func TestBootstrapKeysAgree(t *testing.T) {
	now := time.Now()
	a, _ := NewKey(now)
	b, _ := NewKey(now)
	keys := ParseKeys(map[string][]byte{a.ID: a.Secret, b.ID: b.Secret, "ca.crt": []byte("not a key")})
	if len(keys) != 2 {
		t.Fatalf("%d keys parsed", len(keys))
	}
	r1, r2 := NewKeyring(keys, now, time.Minute), NewKeyring(ParseKeys(map[string][]byte{b.ID: b.Secret, a.ID: a.Secret}), now, time.Minute)
	if r1.Sign("p", nil) != r2.Sign("p", nil) {
		t.Fatal("replicas sign with different keys")
	}
}

func TestDirKeepsAndRotatesKeys(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "records-key")
	s, err := NewDir(context.Background(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	sig := s.Sign("p", []byte("c"))
	info, err := os.Stat(dir)
	if err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("directory mode %v, %v", info.Mode(), err)
	}
	again, err := NewDir(context.Background(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ok, current := again.Verify("p", []byte("c"), sig); !ok || !current {
		t.Fatalf("a restart does not verify its records: ok %v current %v", ok, current)
	}
	files, _ := os.ReadDir(dir)
	for _, f := range files {
		if info, _ := f.Info(); info.Mode().Perm() != 0o600 {
			t.Errorf("key %s mode %v", f.Name(), info.Mode())
		}
	}
	// A restart after RotateEvery adds a key and still verifies the old
	// records.
	rotated, err := NewDir(context.Background(), dir, Options{RotateEvery: time.Nanosecond, Grace: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	if ok, current := rotated.Verify("p", []byte("c"), sig); !ok || current {
		t.Fatalf("after a rotation: ok %v current %v", ok, current)
	}
}
