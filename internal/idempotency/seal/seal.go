// Package seal encrypts the answers an idempotency store keeps, at rest:
// AES-256-GCM under keys named by id, so that keys rotate without a
// migration. The stores (gormstore, redisidem) seal a body as they write a
// record and open it as they read one; the core never sees a ciphertext.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"sort"
)

// KeySize is the size of a response encryption key: AES-256.
const KeySize = 32

// maxKeyIDLength bounds a key id; it is stored on every record.
const maxKeyIDLength = 32

// ErrKeyUnknown: a stored response was encrypted under a key id this
// process does not hold (a key removed from the configuration while records
// encrypted with it were still live, or encryption turned off). The record
// cannot be replayed until the key is configured again. Returned wrapped
// with the key id.
var ErrKeyUnknown = errors.New("stored response is encrypted with an unknown key id")

// ErrUndecryptable: a stored response did not decrypt under its
// key: the ciphertext was altered, or moved from another record.
var ErrUndecryptable = errors.New("stored response does not decrypt")

// Cipher encrypts stored response bodies at rest with AES-256-GCM.
//
// It holds several keys by id. The active one encrypts every response
// written from now on, and the record keeps its id next to the ciphertext;
// the others only decrypt. Rotation is therefore: add a new key, make it
// active, and keep the old one for at least IDEMPOTENCY_TTL, after which no
// live record uses it.
//
// Each body is sealed with a fresh random nonce (stored in front of the
// ciphertext) and with the merchant and key as additional data, so a
// ciphertext copied into another record does not decrypt there. Only the
// body is encrypted: the status, Content-Type and Location say nothing
// secret, and the fingerprint is already a hash.
type Cipher struct {
	active string
	aeads  map[string]cipher.AEAD
}

// New returns a cipher over keys (id → 32-byte key) that
// encrypts with activeID. Ids are 1 to 32 characters of letters, digits,
// '-', '_' and '.'.
func New(keys map[string][]byte, activeID string) (*Cipher, error) {
	if _, ok := keys[activeID]; !ok {
		return nil, fmt.Errorf("response encryption: the active key id %q is not among the keys", activeID)
	}
	c := &Cipher{active: activeID, aeads: make(map[string]cipher.AEAD, len(keys))}
	for id, key := range keys {
		if err := validKeyID(id); err != nil {
			return nil, err
		}
		if len(key) != KeySize {
			return nil, fmt.Errorf("response encryption: key %q is %d bytes, want %d (AES-256)", id, len(key), KeySize)
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("response encryption: key %q: %w", id, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("response encryption: key %q: %w", id, err)
		}
		c.aeads[id] = aead
	}
	return c, nil
}

// ActiveKeyID is the id of the key new responses are encrypted with.
func (c *Cipher) ActiveKeyID() string { return c.active }

// KeyIDs lists the ids of every key held, sorted.
func (c *Cipher) KeyIDs() []string {
	ids := make([]string, 0, len(c.aeads))
	for id := range c.aeads {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Seal encrypts body for the record (scope, key) with the active key and
// returns the key id to store beside it.
func (c *Cipher) Seal(scope, key string, body []byte) (keyID string, sealed []byte, err error) {
	aead := c.aeads[c.active]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(body)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", nil, fmt.Errorf("response encryption: nonce: %w", err)
	}
	return c.active, aead.Seal(nonce, nonce, body, additionalData(scope, key)), nil
}

// Open decrypts what Seal returned. It returns an error wrapping
// ErrKeyUnknown or ErrUndecryptable.
func (c *Cipher) Open(scope, key, keyID string, sealed []byte) ([]byte, error) {
	aead, ok := c.aeads[keyID]
	if !ok {
		return nil, fmt.Errorf("%w: %q (configured: %v)", ErrKeyUnknown, keyID, c.KeyIDs())
	}
	if len(sealed) < aead.NonceSize()+aead.Overhead() {
		return nil, fmt.Errorf("%w: key id %q: too short", ErrUndecryptable, keyID)
	}
	nonce, ciphertext := sealed[:aead.NonceSize()], sealed[aead.NonceSize():]
	body, err := aead.Open(nil, nonce, ciphertext, additionalData(scope, key))
	if err != nil {
		return nil, fmt.Errorf("%w: key id %q: %w", ErrUndecryptable, keyID, err)
	}
	return body, nil
}

// additionalData binds a ciphertext to its record.
func additionalData(scope, key string) []byte {
	return []byte("idempotency-response\x00" + scope + "\x00" + key)
}

func validKeyID(id string) error {
	if id == "" || len(id) > maxKeyIDLength {
		return fmt.Errorf("response encryption: key id %q must be 1 to %d characters", id, maxKeyIDLength)
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
		default:
			return fmt.Errorf("response encryption: key id %q may hold only letters, digits, '-', '_' and '.'", id)
		}
	}
	return nil
}
