package canon

import (
	"crypto/sha256"
	"hash"
	"strconv"
	"sync"
)

// Digest is the SHA-256 of parts, each length-prefixed as "<len>:" so that
// no two splits of the same bytes hash alike, then of body as is (for a
// given count of parts, no two inputs hash the same bytes). Its hash and
// buffers are pooled: a call allocates nothing.
func Digest(body []byte, parts ...string) (sum [sha256.Size]byte) {
	d := digesters.Get().(*digester)
	defer digesters.Put(d)
	b := d.prefix[:0]
	for _, s := range parts {
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, ':')
		b = append(b, s...)
	}
	d.prefix = b
	d.h.Reset()
	d.h.Write(b)
	d.h.Write(body)
	d.sum = d.h.Sum(d.sum[:0])
	copy(sum[:], d.sum)
	return sum
}

// digester is a hash and its buffers, kept between calls.
type digester struct {
	h           hash.Hash
	prefix, sum []byte
}

var digesters = sync.Pool{New: func() any { return &digester{h: sha256.New()} }}
