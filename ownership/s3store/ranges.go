package s3store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// maxRangeRounds bounds the GETs of one attempt at a range read that keep
// meeting 416 while the object's head says the range is there: a longer
// version replacing the object between each 416 and its HEAD.
const maxRangeRounds = 3

// GetRange reads n bytes of an object from byte off with a GET carrying a
// Range header; see ownership.RangeReader. It is retried as a Get is.
//
// S3 answers 416 for a range that starts at or past the end of the object
// (for every range of a zero-length object). The contract makes that an
// empty body with the object's ETag, so on a 416 the store sends a HEAD
// for the ETag, and checks that the version it names does end before off;
// if a longer version has replaced the object since the GET, it asks for
// the range again. A server that ignores Range and answers 200 with the
// whole object has it cut here.
func (s *Store) GetRange(ctx context.Context, key string, off, n int64) (ownership.Object, error) {
	full, err := s.objectKey(key)
	if err != nil {
		return ownership.Object{}, err
	}
	what := fmt.Sprintf("get %s range %d+%d", quote(key), off, n)
	if err := ownership.ValidateRange(off, n); err != nil {
		return ownership.Object{}, fmt.Errorf("s3store: %s: %w", what, err)
	}
	in := &s3.GetObjectInput{Bucket: &s.bucket, Key: &full, Range: aws.String(httpRange(off, n))}
	var obj ownership.Object
	err = s.retries.do(ctx, opGet, what, true, func(ctx context.Context) error {
		var err error
		obj, err = s.getRange(ctx, in, off, n)
		return err
	})
	if err != nil {
		return ownership.Object{}, err
	}
	return obj, nil
}

// httpRange is the Range header of n bytes from off: from off to the end
// when the last of them, off+n-1, would pass the largest int64.
func httpRange(off, n int64) string {
	if n-1 > math.MaxInt64-off {
		return "bytes=" + strconv.FormatInt(off, 10) + "-"
	}
	return "bytes=" + strconv.FormatInt(off, 10) + "-" + strconv.FormatInt(off+n-1, 10)
}

// getRange is one attempt at a range read.
func (s *Store) getRange(ctx context.Context, in *s3.GetObjectInput, off, n int64) (ownership.Object, error) {
	for range maxRangeRounds {
		out, err := s.client.GetObject(ctx, in)
		if status, _ := statusOf(err); status == http.StatusRequestedRangeNotSatisfiable {
			head, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: in.Bucket, Key: in.Key})
			if err != nil {
				return ownership.Object{}, fmt.Errorf("head after 416: %w", err)
			}
			if head.ContentLength == nil {
				return ownership.Object{}, errors.New("head after 416: response has no Content-Length")
			}
			if *head.ContentLength > off {
				continue // a longer version since the GET
			}
			if head.ETag == nil || *head.ETag == "" {
				return ownership.Object{}, errors.New("head after 416: response has no ETag")
			}
			return ownership.Object{Body: []byte{}, ETag: ownership.ETag(*head.ETag)}, nil
		}
		if err != nil {
			return ownership.Object{}, err
		}
		obj, err := readObject(out)
		if err != nil {
			return ownership.Object{}, err
		}
		if obj.Body, err = cutRange(obj.Body, aws.ToString(out.ContentRange), off, n); err != nil {
			return ownership.Object{}, err
		}
		return obj, nil
	}
	return ownership.Object{}, fmt.Errorf("416 %d times, yet each HEAD after it found a longer object: %w",
		maxRangeRounds, ownership.ErrUnknownOutcome)
}

// cutRange returns the bytes of the range [off, off+n) from the body of a
// GET answered with contentRange: the body as it is when the server sent
// that range ("bytes first-last/size"), the range cut out of it when the
// server ignored Range and sent the whole object (no Content-Range).
func cutRange(body []byte, contentRange string, off, n int64) ([]byte, error) {
	if contentRange == "" {
		return ownership.CopyRange(body, off, n), nil
	}
	spec, ok := strings.CutPrefix(contentRange, "bytes ")
	span, _, ok2 := strings.Cut(spec, "/")
	firstText, lastText, ok3 := strings.Cut(span, "-")
	first, err1 := strconv.ParseInt(firstText, 10, 64)
	last, err2 := strconv.ParseInt(lastText, 10, 64)
	if !ok || !ok2 || !ok3 || err1 != nil || err2 != nil {
		return nil, fmt.Errorf("server answered with Content-Range %q", contentRange)
	}
	if first != off || last < first || last-first >= n {
		return nil, fmt.Errorf("server answered bytes %d-%d for %d bytes from %d", first, last, n, off)
	}
	if int64(len(body)) != last-first+1 {
		return nil, fmt.Errorf("server answered %d bytes for its Content-Range %q", len(body), contentRange)
	}
	return body, nil
}

// statusOf is the HTTP status an error from the SDK carries, and whether
// it carries one (the SDK gives transport failures a status of 0).
func statusOf(err error) (int, bool) {
	var withStatus interface{ HTTPStatusCode() int }
	if errors.As(err, &withStatus) {
		return withStatus.HTTPStatusCode(), true
	}
	return 0, false
}
