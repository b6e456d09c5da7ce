package dirstore

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"hash/crc32"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// An object file is a fixed-size text header followed by the body:
//
//	wkobj1 <ETag: 32 hex digits> <CRC-32C of the body: 8 hex digits>\n
//
// The ETag lives in the file, not in its name, so that replacing an object
// stays a single rename. It is 128 random bits, so every write gets a new
// one even for identical bytes, across processes, without coordination.
// The checksum is not needed for atomicity (objects appear by rename, whole)
// but turns disk or file-system damage into an error instead of wrong bytes.
const (
	headerMagic = "wkobj1 "
	etagLen     = 32
	headerLen   = len(headerMagic) + etagLen + 1 + 8 + 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// newETag returns a fresh random ETag.
func newETag() ownership.ETag {
	var b [etagLen / 2]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand.Read panics instead)
	return ownership.ETag(hex.EncodeToString(b[:]))
}

func appendHeader(dst []byte, etag ownership.ETag, body []byte) []byte {
	return fmt.Appendf(dst, "%s%s %08x\n", headerMagic, etag, crc32.Checksum(body, castagnoli))
}

// parseHeader returns the ETag and body checksum of an object file.
func parseHeader(h []byte) (ownership.ETag, uint32, error) {
	if len(h) < headerLen || string(h[:len(headerMagic)]) != headerMagic ||
		h[headerLen-10] != ' ' || h[headerLen-1] != '\n' {
		return "", 0, errCorrupt
	}
	etag := h[len(headerMagic) : len(headerMagic)+etagLen]
	var sum [4]byte
	if _, err := hex.Decode(sum[:], h[headerLen-9:headerLen-1]); err != nil {
		return "", 0, errCorrupt
	}
	for _, c := range etag {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", 0, errCorrupt
		}
	}
	return ownership.ETag(etag), uint32(sum[0])<<24 | uint32(sum[1])<<16 | uint32(sum[2])<<8 | uint32(sum[3]), nil
}

// parseObject splits an object file into its ETag and body, checking the
// body against its checksum. body aliases data.
func parseObject(data []byte) (ownership.Object, error) {
	etag, sum, err := parseHeader(data)
	if err != nil {
		return ownership.Object{}, err
	}
	body := data[headerLen:]
	if crc32.Checksum(body, castagnoli) != sum {
		return ownership.Object{}, fmt.Errorf("%w: body checksum mismatch", errCorrupt)
	}
	return ownership.Object{Body: body, ETag: etag}, nil
}
