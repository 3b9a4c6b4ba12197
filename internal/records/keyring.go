package records

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// keyPrefix names a key in a Secret's data or a directory:
// key-<unix nanoseconds>-<random hex>. The time orders the keys; the random
// part keeps two replicas' bootstrap keys apart.
const keyPrefix = "key-"

// keySize is a key's length: SHA-256's block size would do as well, but
// 32 bytes is the HMAC key length RFC 2104 recommends for SHA-256.
const keySize = 32

// Key is one signing key.
type Key struct {
	ID      string
	Created time.Time
	Secret  []byte
}

// NewKey generates a key created at now.
func NewKey(now time.Time) (Key, error) {
	secret := make([]byte, keySize)
	if _, err := rand.Read(secret); err != nil {
		return Key{}, fmt.Errorf("generate records key: %w", err)
	}
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		return Key{}, fmt.Errorf("generate records key: %w", err)
	}
	return Key{ID: fmt.Sprintf("%s%d-%s", keyPrefix, now.UnixNano(), hex.EncodeToString(suffix)), Created: time.Unix(0, now.UnixNano()), Secret: secret}, nil
}

// ParseKeys reads the keys of data (a Secret's data, a directory's files
// by name), newest first; entries that are not keys are ignored.
func ParseKeys(data map[string][]byte) []Key {
	var keys []Key
	for name, secret := range data {
		if !strings.HasPrefix(name, keyPrefix) || len(secret) < keySize {
			continue
		}
		stamp, _, _ := strings.Cut(strings.TrimPrefix(name, keyPrefix), "-")
		nsec, err := strconv.ParseInt(stamp, 10, 64)
		if err != nil {
			continue
		}
		keys = append(keys, Key{ID: name, Created: time.Unix(0, nsec), Secret: secret})
	}
	sort.Slice(keys, func(i, j int) bool {
		if !keys[i].Created.Equal(keys[j].Created) {
			return keys[i].Created.After(keys[j].Created)
		}
		return keys[i].ID > keys[j].ID
	})
	return keys
}

// Options tune the rotation. Zero values take the defaults.
type Options struct {
	// RotateEvery is how long a key is the newest before the next one is
	// added.
	RotateEvery time.Duration
	// Keep is how many keys are kept (the newest included): a record
	// signed with a key verifies until Keep-1 newer keys were added, so
	// for at least (Keep-2)*RotateEvery after its key stopped signing.
	Keep int
	// Grace is how long a new key waits before it signs: long enough for
	// every replica to load it (they reload every ReloadEvery), so that no
	// replica meets a record signed with a key it does not know yet.
	Grace time.Duration
	// ReloadEvery is how often every replica reads the keys again.
	ReloadEvery time.Duration
}

// Defaults of Options.
const (
	DefaultRotateEvery = 30 * 24 * time.Hour
	DefaultKeep        = 3
	DefaultGrace       = 10 * time.Minute
	DefaultReloadEvery = time.Minute
)

func (o *Options) setDefaults() {
	if o.RotateEvery == 0 {
		o.RotateEvery = DefaultRotateEvery
	}
	if o.Keep == 0 {
		o.Keep = DefaultKeep
	}
	if o.Grace == 0 {
		o.Grace = DefaultGrace
	}
	if o.ReloadEvery == 0 {
		o.ReloadEvery = DefaultReloadEvery
	}
}

// Plan decides the rotation of keys (newest first) at now: the keys to
// keep, whether that is a change, and when to look again. It is a pure
// function of its arguments but for the key it generates.
func Plan(keys []Key, now time.Time, o Options) (next []Key, changed bool, wake time.Time, err error) {
	o.setDefaults()
	if len(keys) == 0 || !now.Before(keys[0].Created.Add(o.RotateEvery)) {
		k, err := NewKey(now)
		if err != nil {
			return nil, false, time.Time{}, err
		}
		keys = append([]Key{k}, keys...)
		changed = true
	}
	if len(keys) > o.Keep {
		keys, changed = keys[:o.Keep], true
	}
	return keys, changed, keys[0].Created.Add(o.RotateEvery), nil
}

// Keyring is a set of keys, newest first; it signs with one and verifies
// with all.
type Keyring struct {
	keys    []Key
	signing int
}

// NewKeyring chooses the signing key at now: the newest one older than
// grace (every replica has loaded it), else the oldest (the only ones are
// bootstrap keys, which every replica reads before it serves).
func NewKeyring(keys []Key, now time.Time, grace time.Duration) *Keyring {
	k := &Keyring{keys: keys, signing: len(keys) - 1}
	for i, key := range keys {
		if !now.Before(key.Created.Add(grace)) {
			k.signing = i
			break
		}
	}
	return k
}

// Len is the number of keys.
func (k *Keyring) Len() int { return len(k.keys) }

// Sign signs claims under purpose with the signing key: "<key id>.<mac>".
// It returns "" when the keyring holds no key.
func (k *Keyring) Sign(purpose string, claims []byte) string {
	if k == nil || len(k.keys) == 0 {
		return ""
	}
	key := k.keys[k.signing]
	return key.ID + "." + base64.RawURLEncoding.EncodeToString(mac(key.Secret, purpose, claims))
}

// Verify says whether sig signs claims under purpose with one of the
// keys (ok), and whether that key is the signing one (current): a record
// verified with an older key should be signed again before its key is
// dropped. known is false when sig names no key of the ring.
func (k *Keyring) Verify(purpose string, claims []byte, sig string) (ok, current, known bool) {
	if k == nil {
		return false, false, false
	}
	id, encoded, found := strings.Cut(sig, ".")
	if !found {
		return false, false, true
	}
	got, err := base64.RawURLEncoding.DecodeString(encoded)
	if err != nil {
		return false, false, true
	}
	for i, key := range k.keys {
		if key.ID == id {
			return hmac.Equal(got, mac(key.Secret, purpose, claims)), i == k.signing, true
		}
	}
	return false, false, false
}

// mac is the HMAC of purpose and claims, each length-prefixed so that no
// pair of them reads as another.
func mac(secret []byte, purpose string, claims []byte) []byte {
	h := hmac.New(sha256.New, secret)
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(purpose)))
	h.Write(n[:])
	h.Write([]byte(purpose))
	binary.BigEndian.PutUint64(n[:], uint64(len(claims)))
	h.Write(n[:])
	h.Write(claims)
	return h.Sum(nil)
}

// Static is a keyring that never changes, as module.Records: for tests and
// for processes that sign nothing they read back later.
type Static struct{ Ring *Keyring }

// NewStatic returns a Static holding one fresh key.
func NewStatic() *Static {
	k, err := NewKey(time.Now())
	if err != nil {
		panic(err)
	}
	return &Static{Ring: NewKeyring([]Key{k}, time.Now(), 0)}
}

func (s *Static) Sign(purpose string, claims []byte) string { return s.Ring.Sign(purpose, claims) }

func (s *Static) Verify(purpose string, claims []byte, sig string) (ok, current bool) {
	ok, current, _ = s.Ring.Verify(purpose, claims, sig)
	return ok, current
}
