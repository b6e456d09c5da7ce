package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Store is an ownership.Bucket backed by an S3-compatible bucket.
type Store struct {
	client  *s3.Client
	bucket  string
	prefix  string
	retries retryPolicy
}

var _ ownership.RangeReader = (*Store)(nil)

// New validates cfg and builds a Store. It resolves configuration and
// credentials providers but sends no request: the first call on the Store is
// the first contact with the server.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()

	opts := []func(*awsconfig.LoadOptions) error{
		// Our retry loop is the only one: the SDK's would repeat conditional
		// writes after a timeout, which can turn a win into a 412.
		awsconfig.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} }),
	}
	if cfg.Region != "" {
		opts = append(opts, awsconfig.WithRegion(cfg.Region))
	}
	if cfg.AccessKey != "" {
		opts = append(opts, awsconfig.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKey, cfg.SecretKey, cfg.SessionToken)))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, awsconfig.WithHTTPClient(cfg.HTTPClient))
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3store: load aws configuration: %w", err)
	}
	if awsCfg.Region == "" {
		if cfg.Endpoint == "" {
			return nil, errors.New("s3store: no region: set Config.Region or AWS_REGION")
		}
		awsCfg.Region = DefaultRegion
	}

	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.PathStyle
		o.Retryer = aws.NopRetryer{}
		// AWS_MAX_ATTEMPTS in the environment would otherwise wrap the
		// retryer again; one attempt per call, whatever it says.
		o.RetryMaxAttempts = 1
		// Only send and check checksums where an operation requires one.
		// The SDK's default adds CRC headers (trailers, for streamed
		// bodies) that some S3-compatible servers reject, and records are
		// small and sent whole, under TLS or SigV4's payload hash. (The
		// test server, versitygw v1.8.0, accepts either setting.)
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	return &Store{
		client:  client,
		bucket:  cfg.Bucket,
		prefix:  cfg.Prefix,
		retries: newRetryPolicy(cfg.AttemptTimeout, cfg.MaxAttempts),
	}, nil
}

// objectKey maps a caller's key to the stored key.
func (s *Store) objectKey(key string) (string, error) {
	if err := ownership.ValidateKey(key); err != nil {
		return "", fmt.Errorf("s3store: key %q: %w", key, err)
	}
	full := s.prefix + key
	if len(full) > ownership.MaxKeyLen {
		return "", fmt.Errorf("s3store: key %q: %w: %d bytes with the prefix, over %d",
			key, ownership.ErrInvalidKey, len(full), ownership.MaxKeyLen)
	}
	return full, nil
}

// Get reads an object; a missing key is ownership.ErrNotFound.
func (s *Store) Get(ctx context.Context, key string) (ownership.Object, error) {
	full, err := s.objectKey(key)
	if err != nil {
		return ownership.Object{}, err
	}
	var obj ownership.Object
	err = s.retries.do(ctx, opGet, "get "+quote(key), true, func(ctx context.Context) error {
		// A body that fails its checksum is read once more (it may have
		// been damaged on its way), then reported damaged.
		var damage error
		for range 2 {
			out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &full})
			if err != nil {
				return err
			}
			if obj, err = readObject(out); err != nil {
				return err
			}
			if damage = checkSum(out.Metadata, obj.Body); damage == nil {
				return nil
			}
		}
		return damage
	})
	if err != nil {
		return ownership.Object{}, err
	}
	return obj, nil
}

// SumMetadata is the user metadata (x-amz-meta-wk-crc32c) under which the
// store keeps the CRC-32C of every object it writes, eight hexadecimal
// digits, and checks it on every whole read: a byte changed at rest or on
// the way is found and named as damage (ownership.ErrDamaged), whatever
// the server does or does not check. An object without it (written by an
// earlier version, or by another tool) is read unchecked. A range read
// cannot be checked against the whole object's sum: what wasmkeep reads by
// range (the runs of actors' storage) carries checksums of its own parts.
const SumMetadata = "wk-crc32c"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sumOf is the value of SumMetadata for body.
func sumOf(body []byte) string { return fmt.Sprintf("%08x", crc32.Checksum(body, castagnoli)) }

// checkSum checks body against the sum its object's metadata holds, if
// any.
func checkSum(meta map[string]string, body []byte) error {
	want, ok := meta[SumMetadata]
	if !ok {
		return nil
	}
	if got := sumOf(body); got != want {
		return fmt.Errorf("%w: the body's CRC-32C is %s, its metadata says %s (%d bytes)", ownership.ErrDamaged, got, want, len(body))
	}
	return nil
}

// readObject reads a GET's answer: its body, and the ETag it must have.
// It is called inside the attempt, so that the attempt's deadline covers
// the transfer, not just the headers.
func readObject(out *s3.GetObjectOutput) (ownership.Object, error) {
	body, err := io.ReadAll(out.Body)
	_ = out.Body.Close()
	if err != nil {
		return ownership.Object{}, fmt.Errorf("read body: %w", err)
	}
	if out.ETag == nil || *out.ETag == "" {
		return ownership.Object{}, errors.New("response has no ETag")
	}
	return ownership.Object{Body: body, ETag: ownership.ETag(*out.ETag)}, nil
}

// Put writes an object under cond and returns the ETag S3 gave it, verbatim.
func (s *Store) Put(ctx context.Context, key string, body []byte, cond ownership.Condition) (ownership.ETag, error) {
	full, err := s.objectKey(key)
	if err != nil {
		return "", err
	}
	what := "put " + quote(key) + " " + cond.String()
	in := &s3.PutObjectInput{Bucket: &s.bucket, Key: &full, ContentLength: aws.Int64(int64(len(body))),
		Metadata: map[string]string{SumMetadata: sumOf(body)}}
	o := opPut
	switch cond.Kind {
	case ownership.Unconditional:
	case ownership.CreateOnly:
		in.IfNoneMatch = aws.String("*")
		o = opCondPut
	case ownership.ReplaceOnly:
		if cond.ETag == "" {
			// No version has the empty ETag, so the condition cannot
			// hold; S3 would not even see the empty header.
			return "", fmt.Errorf("s3store: %s: %w: no object has the empty ETag", what, ownership.ErrPrecondition)
		}
		in.IfMatch = aws.String(string(cond.ETag))
		o = opCondPut
	default:
		return "", fmt.Errorf("s3store: %s: unknown condition", what)
	}

	var etag ownership.ETag
	err = s.retries.do(ctx, o, what, o == opPut, func(ctx context.Context) error {
		// A fresh reader per attempt: a retried body starts from byte 0.
		in.Body = bytes.NewReader(body)
		out, err := s.client.PutObject(ctx, in)
		if err != nil {
			return err
		}
		if out.ETag == nil || *out.ETag == "" {
			// The write landed, but without its ETag the caller cannot
			// build on it; a re-read will tell it what it needs.
			return fmt.Errorf("response has no ETag: %w", ownership.ErrUnknownOutcome)
		}
		etag = ownership.ETag(*out.ETag)
		return nil
	})
	if err != nil {
		return "", err
	}
	return etag, nil
}

// Delete removes an object. IfMatch deletes only that version; a missing key
// then is ownership.ErrPrecondition. CreateOnly is a bad argument.
func (s *Store) Delete(ctx context.Context, key string, cond ownership.Condition) error {
	full, err := s.objectKey(key)
	if err != nil {
		return err
	}
	what := "delete " + quote(key) + " " + cond.String()
	in := &s3.DeleteObjectInput{Bucket: &s.bucket, Key: &full}
	o := opDelete
	switch cond.Kind {
	case ownership.Unconditional:
	case ownership.ReplaceOnly:
		if cond.ETag == "" {
			return fmt.Errorf("s3store: %s: %w: no object has the empty ETag", what, ownership.ErrPrecondition)
		}
		in.IfMatch = aws.String(string(cond.ETag))
		o = opCondDelete
	default:
		return fmt.Errorf("s3store: %s: a delete takes no %s condition", what, cond.Kind)
	}
	return s.retries.do(ctx, o, what, o == opDelete, func(ctx context.Context) error {
		_, err := s.client.DeleteObject(ctx, in)
		return err
	})
}

// List returns up to limit keys under prefix after startAfter, in the order S3
// returns them (ascending bytes), with Config.Prefix stripped.
func (s *Store) List(ctx context.Context, prefix, startAfter string, limit int) (ownership.ListPage, error) {
	if limit <= 0 || limit > ownership.DefaultListLimit {
		// S3 never returns more than 1,000 keys a page; asking for more
		// would only hide that the page was cut.
		limit = ownership.DefaultListLimit
	}
	in := &s3.ListObjectsV2Input{
		Bucket:  &s.bucket,
		Prefix:  aws.String(s.prefix + prefix),
		MaxKeys: aws.Int32(int32(limit)),
		// XML 1.0 cannot carry every character a key may hold (control
		// characters); URL-encoded keys survive. Servers that ignore the
		// parameter say so by not echoing it, and send keys plain.
		EncodingType: types.EncodingTypeUrl,
	}
	if startAfter != "" {
		in.StartAfter = aws.String(s.prefix + startAfter)
	}
	what := "list " + quote(prefix) + " after " + quote(startAfter)
	var page ownership.ListPage
	err := s.retries.do(ctx, opList, what, true, func(ctx context.Context) error {
		out, err := s.client.ListObjectsV2(ctx, in)
		if err != nil {
			return err
		}
		entries := make([]ownership.ListEntry, 0, len(out.Contents))
		encoded := out.EncodingType == types.EncodingTypeUrl
		for _, c := range out.Contents {
			k := aws.ToString(c.Key)
			if encoded {
				// S3 encodes as a form value: a space is "+", a plus "%2B".
				if k, err = url.QueryUnescape(k); err != nil {
					return fmt.Errorf("server listed an undecodable key %q: %w", aws.ToString(c.Key), err)
				}
			}
			rel, ok := strings.CutPrefix(k, s.prefix)
			if !ok {
				return fmt.Errorf("server listed %q outside prefix %q", k, s.prefix)
			}
			entries = append(entries, ownership.ListEntry{
				Key:  rel,
				ETag: ownership.ETag(aws.ToString(c.ETag)),
				Size: aws.ToInt64(c.Size),
			})
		}
		page = ownership.ListPage{Entries: entries, Truncated: aws.ToBool(out.IsTruncated)}
		return nil
	})
	if err != nil {
		return ownership.ListPage{}, err
	}
	return page, nil
}

// quote renders a key for an error message.
func quote(s string) string { return fmt.Sprintf("%q", s) }
