// Package merchants keeps the merchants of the API and their API keys, and
// answers the one question every /v1 request asks first: whose key is this?
//
// An API key is shown once, when it is made, and stored only as the hex
// SHA-256 of the key plus a short display prefix. A fast unsalted hash is
// enough because made keys carry 128 random bits: there is nothing to guess,
// and a slow password hash would put milliseconds of CPU on every request.
// (The demo keys are short, but they are public anyway.)
//
// Authenticate sits on the hot path, so a small in-process cache maps key
// hashes to merchants for a minute. A revoked key (when revocation exists)
// may keep working on an instance for up to the cache TTL.
//
// Unknown keys are remembered too, apart, for a shorter while
// (UnknownKeyTTL) and in a bounded set of their own (UnknownKeyCacheSize): a
// flood of requests with a wrong key then costs one database read per key
// and instance, not one per request, and cannot push the known keys out of
// their cache. A key is made with 128 random bits and shown only once, so
// nobody sends it before it exists; the one key a negative entry could
// delay is a key made on another instance after this one was asked for it,
// and only for UnknownKeyTTL (a key made here clears its entry at once).
//
// The demo merchants' keys are public (SeedDemo). Production refuses to
// start on a database that holds them, but a database can gain them later
// (a replica started without APP_ENV=production seeds them), so a Store
// told to (RefuseDemoKeys) answers them as unknown keys wherever they come
// from, and says so once.
package merchants

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"
	"golang.org/x/sync/singleflight"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/dbtx"
)

// Errors of the Store, wrapped with %w where they carry context.
var (
	// ErrUnauthorized: the API key is missing, malformed or unknown.
	ErrUnauthorized = errors.New("unknown API key")
	// ErrNameTaken: another merchant has this name.
	ErrNameTaken = errors.New("merchant name taken")
	// ErrInvalidName: the name is empty, blank, longer than MaxNameLength,
	// or holds control characters, bidirectional controls or zero-width
	// spaces (the rules of the payments package's text fields).
	ErrInvalidName = errors.New("invalid merchant name")
)

// Limits of names and keys.
const (
	MaxNameLength = 255
	// MaxKeyLength bounds what Authenticate hashes; longer keys are refused
	// without a database round trip.
	MaxKeyLength = 255
)

// Cache settings of Authenticate: known keys, and apart the unknown ones.
const (
	CacheTTL            = time.Minute
	CacheSize           = 10_000
	UnknownKeyTTL       = 10 * time.Second
	UnknownKeyCacheSize = 10_000
)

// Merchant is one account of the API.
type Merchant struct {
	ID        string
	Name      string
	CreatedAt time.Time
}

// Store keeps merchants and their API keys.
type Store struct {
	db    *gorm.DB
	clock func() time.Time
	cache *keyCache
	// unknown holds the hashes of keys the database did not know, each
	// mapped to "".
	unknown *keyCache
	// lookups lets one database read serve every request that missed the
	// cache for the same key at the same moment: when a key's entry
	// expires under a retry storm, a thousand requests would otherwise
	// each take a connection for the same row (seen in tools/bench as an
	// exhausted pool).
	lookups singleflight.Group
	// budget bounds, per client address, the reads of keys the caches do
	// not know (LimitUnknownKeys); nil means no bound.
	budget *keyBudget
	// onLookup hears each database read of a key, by result: known,
	// unknown, demo (found, but refused: RefuseDemoKeys), or limited
	// (refused unread, over the client's budget).
	onLookup func(result string)
	// demoHashes maps the hashes of the demo keys to their merchants'
	// names when RefuseDemoKeys is on; nil otherwise.
	demoHashes map[keyHash]string
	// onDemoKey hears, once (demoWarned), which demo merchants' keys the
	// database holds.
	onDemoKey  func(names []string)
	demoWarned sync.Once
}

// RefuseDemoKeys makes Authenticate answer the demo merchants' public API
// keys ErrUnauthorized even when the database holds them, as production
// must whatever put them there, and charge them to the client's budget of
// unknown keys like any key it does not know. The first time it finds one
// in the database, warn (if not nil) hears the names of the demo merchants
// whose keys the database then holds (acme, globex), never a key; only
// once, so that a client retrying a public key cannot flood the log. It
// must be called before the Store is used.
func (s *Store) RefuseDemoKeys(warn func(names []string)) {
	s.demoHashes = make(map[keyHash]string, len(demoMerchants))
	for _, d := range demoMerchants {
		s.demoHashes[sumKey(d.apiKey)] = d.name
	}
	s.onDemoKey = warn
}

// LimitUnknownKeys bounds the database reads that keys unknown to the
// caches cost each client address (WithClient) to limit per window. A key
// the caches know is never limited; a key over the budget is refused with
// a *KeyBudgetError without being read. onLookup, if not nil, hears each
// read's result (known, unknown, or demo: see RefuseDemoKeys) and each
// refusal (limited). It must be called before the Store is used.
func (s *Store) LimitUnknownKeys(limit int, window time.Duration, onLookup func(result string)) {
	if limit > 0 {
		s.budget = newKeyBudget(limit, window)
	}
	s.onLookup = onLookup
}

func (s *Store) heard(result string) {
	if s.onLookup != nil {
		s.onLookup(result)
	}
}

// NewStore returns a Store over db. clock tells the time of new merchants and
// of the auth cache; nil means the wall clock.
func NewStore(db *gorm.DB, clock func() time.Time) *Store {
	if clock == nil {
		clock = time.Now
	}
	return &Store{db: db, clock: clock, cache: newKeyCache(CacheTTL, CacheSize), unknown: newKeyCache(UnknownKeyTTL, UnknownKeyCacheSize)}
}

type merchantRow struct {
	ID        string    `gorm:"column:id;primaryKey"`
	Name      string    `gorm:"column:name"`
	CreatedAt time.Time `gorm:"column:created_at;autoCreateTime:false"`
}

// TableName tells GORM the table, which the migrations own.
func (merchantRow) TableName() string { return "merchants" }

type apiKeyRow struct {
	KeyHash    string    `gorm:"column:key_hash;primaryKey"`
	MerchantID string    `gorm:"column:merchant_id"`
	KeyPrefix  string    `gorm:"column:key_prefix"`
	CreatedAt  time.Time `gorm:"column:created_at;autoCreateTime:false"`
}

// TableName tells GORM the table, which the migrations own.
func (apiKeyRow) TableName() string { return "api_keys" }

// now is the clock in UTC at the precision both databases keep.
func (s *Store) now() time.Time { return s.clock().UTC().Truncate(time.Microsecond) }

// Create makes a merchant with a new live API key and returns both; the key
// is not stored and cannot be shown again. It returns ErrInvalidName,
// ErrNameTaken, or an error wrapping database.ErrUnavailable.
func (s *Store) Create(ctx context.Context, name string) (Merchant, string, error) {
	if strings.TrimSpace(name) == "" || !utf8.ValidString(name) || utf8.RuneCountInString(name) > MaxNameLength || strings.ContainsFunc(name, invisible) {
		return Merchant{}, "", ErrInvalidName
	}
	now := s.now()
	id, err := ulid.New(ulid.Timestamp(now), ulid.DefaultEntropy())
	if err != nil {
		return Merchant{}, "", fmt.Errorf("make merchant id: %w", err)
	}
	m := Merchant{ID: "mch_" + id.String(), Name: name, CreatedAt: now}
	apiKey := newAPIKey()

	err = database.Transaction(ctx, s.db, func(ctx context.Context) error {
		conn := dbtx.Conn(ctx, s.db)
		err := conn.Create(&merchantRow{ID: m.ID, Name: m.Name, CreatedAt: m.CreatedAt}).Error
		if database.IsUniqueViolation(err) {
			// The id is fresh, so the clash is on the name.
			return ErrNameTaken
		}
		if err != nil {
			return err
		}
		return conn.Create(&apiKeyRow{
			KeyHash: hashKey(apiKey), MerchantID: m.ID, KeyPrefix: displayPrefix(apiKey), CreatedAt: now,
		}).Error
	})
	if err != nil {
		return Merchant{}, "", fmt.Errorf("create merchant: %w", err)
	}
	s.unknown.drop(sumKey(apiKey))
	return m, apiKey, nil
}

// Authenticate returns the id of the merchant that owns apiKey. It returns
// ErrUnauthorized for an unknown key, or an error wrapping
// database.ErrUnavailable when it cannot tell.
func (s *Store) Authenticate(ctx context.Context, apiKey string) (string, error) {
	if apiKey == "" || len(apiKey) > MaxKeyLength {
		return "", ErrUnauthorized
	}
	// The caches are keyed by the hash itself: its hex text, which the
	// database holds, is made only for a read.
	hash := sumKey(apiKey)
	if merchantID, ok := s.cache.get(hash, s.clock()); ok {
		return merchantID, nil
	}
	if _, ok := s.unknown.get(hash, s.clock()); ok {
		return "", ErrUnauthorized
	}
	// A read the caches cannot spare. The shared read must not fail for
	// everyone because the first caller hung up, so it runs on its own
	// deadline; and it is the read that costs, so the caller that makes it
	// pays from its client's budget, once however many requests share it.
	id, err, shared := s.lookups.Do(hash.String(), s.read(ctx, hash))
	var refused *KeyBudgetError
	if shared && errors.As(err, &refused) {
		// The read was refused on another client's budget: this
		// client's own budget decides.
		id, err, _ = s.lookups.Do(hash.String(), s.read(ctx, hash))
	}
	if errors.As(err, &refused) {
		return "", refused
	}
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return "", ErrUnauthorized
	}
	if err != nil {
		return "", fmt.Errorf("authenticate: %w", database.Classify(err))
	}
	return id.(string), nil
}

// read is the database read of hash, paid for from the budget of the
// client ctx names: a known key, or a read that failed, gives it back.
func (s *Store) read(ctx context.Context, hash keyHash) func() (any, error) {
	return func() (any, error) {
		client := clientFrom(ctx)
		if s.budget != nil && client != "" {
			ok, retry := s.budget.reserve(client, s.clock())
			if !ok {
				s.heard("limited")
				return "", &KeyBudgetError{RetryAfter: retry}
			}
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lookupTimeout)
		defer cancel()
		var row apiKeyRow
		err := dbtx.Conn(ctx, s.db).Select("merchant_id").Where("key_hash = ?", hash.String()).Take(&row).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			s.unknown.put(hash, "", s.clock())
			s.heard("unknown")
			return "", err
		}
		if name, demo := s.demoHashes[hash]; demo && err == nil {
			// Found, so the database holds a public key: answered and
			// remembered as unknown (one read per UnknownKeyTTL), never
			// cached as known.
			s.unknown.put(hash, "", s.clock())
			s.heard("demo")
			s.warnDemoKeys(ctx, name)
			return "", gorm.ErrRecordNotFound
		}
		if s.budget != nil && client != "" {
			s.budget.giveBack(client) // known keys, and reads that failed, cost nothing
		}
		if err != nil {
			return "", err
		}
		s.heard("known")
		s.cache.put(hash, row.MerchantID, s.clock())
		return row.MerchantID, nil
	}
}

// warnDemoKeys tells onDemoKey, once, which demo merchants' keys the
// database holds: all of them, so that one warning names every key to
// revoke, or at least the one just found if the database cannot say.
func (s *Store) warnDemoKeys(ctx context.Context, found string) {
	s.demoWarned.Do(func() {
		if s.onDemoKey == nil {
			return
		}
		held, err := s.DemoKeysHeld(ctx)
		if err != nil || len(held) == 0 {
			held = []string{found}
		}
		s.onDemoKey(held)
	})
}

// lookupTimeout bounds the one database read behind a cache miss.
const lookupTimeout = 5 * time.Second

// DemoAPIKey is the public API key of the demo merchant acme, which the
// development checkout page fills in.
const DemoAPIKey = "sk_test_acme"

// demoMerchants are the merchants SeedDemo makes; their keys are public.
var demoMerchants = []struct{ id, name, apiKey string }{
	{id: "mch_acme", name: "acme", apiKey: DemoAPIKey},
	{id: "mch_globex", name: "globex", apiKey: "sk_test_globex"},
}

// SeedDemo makes the demo merchants acme (key sk_test_acme) and globex (key
// sk_test_globex) unless they exist. Every insert is insert-if-absent, so
// running it again, or from two processes at once, is harmless. It returns
// an error wrapping database.ErrUnavailable, or a plain error when a merchant
// of another id already holds a demo name.
func (s *Store) SeedDemo(ctx context.Context) error {
	now := s.now()
	for _, d := range demoMerchants {
		err := database.Transaction(ctx, s.db, func(ctx context.Context) error {
			// A fresh chain per statement: a GORM chain reused after a
			// finisher carries the first statement's state into the second.
			insertIfAbsent := func() *gorm.DB {
				return dbtx.Conn(ctx, s.db).Clauses(clause.OnConflict{DoNothing: true})
			}
			if err := insertIfAbsent().Create(&merchantRow{ID: d.id, Name: d.name, CreatedAt: now}).Error; err != nil {
				return err
			}
			return insertIfAbsent().Create(&apiKeyRow{
				KeyHash: hashKey(d.apiKey), MerchantID: d.id, KeyPrefix: displayPrefix(d.apiKey), CreatedAt: now,
			}).Error
		})
		if err != nil {
			return fmt.Errorf("seed merchant %s: %w", d.name, err)
		}
		s.unknown.drop(sumKey(d.apiKey))
	}
	return nil
}

// DemoKeysHeld returns the names of the demo merchants whose public API
// key the database still holds (acme, globex), in a fixed order: a
// database once started in development keeps them after the seed is turned
// off. It returns an error wrapping database.ErrUnavailable.
func (s *Store) DemoKeysHeld(ctx context.Context) ([]string, error) {
	var held []string
	for _, d := range demoMerchants {
		var n int64
		err := dbtx.Conn(ctx, s.db).Model(&apiKeyRow{}).Where("key_hash = ?", hashKey(d.apiKey)).Count(&n).Error
		if err != nil {
			return nil, fmt.Errorf("look for demo keys: %w", database.Classify(err))
		}
		if n > 0 {
			held = append(held, d.name)
		}
	}
	return held, nil
}

// RevokeDemoKeys deletes the demo merchants' public API keys and returns
// the names of the merchants whose key it deleted. The merchants and their
// data stay; only the keys anyone could read in the README stop working.
// It returns an error wrapping database.ErrUnavailable.
func (s *Store) RevokeDemoKeys(ctx context.Context) ([]string, error) {
	var revoked []string
	for _, d := range demoMerchants {
		res := dbtx.Conn(ctx, s.db).Where("key_hash = ?", hashKey(d.apiKey)).Delete(&apiKeyRow{})
		if res.Error != nil {
			return revoked, fmt.Errorf("revoke demo key of %s: %w", d.name, database.Classify(res.Error))
		}
		s.cache.drop(sumKey(d.apiKey))
		if res.RowsAffected > 0 {
			revoked = append(revoked, d.name)
		}
	}
	return revoked, nil
}

// invisible reports a character a merchant name must not hold: a control
// character, a bidirectional embedding, override or isolate, or a
// zero-width space, any of which lets one name pass for another on a
// dashboard. The joiners U+200C and U+200D stay allowed.
func invisible(r rune) bool {
	switch {
	case unicode.IsControl(r), r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069,
		r == 0x200b, r == 0x2060, r == 0xfeff:
		return true
	}
	return false
}

// newAPIKey returns "sk_live_" and 32 hex characters: 128 random bits.
func newAPIKey() string {
	b := make([]byte, 16)
	// crypto/rand.Read never fails (it crashes the program instead).
	_, _ = rand.Read(b)
	return "sk_live_" + hex.EncodeToString(b)
}

// keyHash is the SHA-256 of an API key.
type keyHash [sha256.Size]byte

func sumKey(apiKey string) keyHash { return sha256.Sum256([]byte(apiKey)) }

// String is the hash as the database holds it: 64 hex digits.
func (h keyHash) String() string {
	var text [2 * sha256.Size]byte
	hex.Encode(text[:], h[:])
	return string(text[:])
}

func hashKey(apiKey string) string { return sumKey(apiKey).String() }

// displayPrefix is what a dashboard may show of a key to tell keys apart:
// the kind ("sk_live_") and at most 4 characters of the secret, never more
// than a third of it, so that the prefix never gives a key away.
func displayPrefix(apiKey string) string {
	kind := strings.LastIndexByte(apiKey, '_') + 1
	secret := len(apiKey) - kind
	return apiKey[:kind+min(4, secret/3)]
}
