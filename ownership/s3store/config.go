package s3store

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Defaults applied by New to zero Config fields.
const (
	// DefaultAttemptTimeout bounds one HTTP attempt. Records are small, so an
	// attempt that takes longer than this is stuck rather than slow.
	DefaultAttemptTimeout = 10 * time.Second
	// DefaultMaxAttempts is how often a repeatable operation is tried.
	DefaultMaxAttempts = 3
	// DefaultRegion is used with a custom Endpoint when neither Config nor the
	// SDK's configuration chain names one: S3-compatible servers need some
	// region to verify signatures and nearly all accept this one.
	DefaultRegion = "us-east-1"
)

// HTTPClient sends one HTTP request; *http.Client satisfies it.
type HTTPClient interface {
	Do(*http.Request) (*http.Response, error)
}

// Config says where the bucket is and how to reach it. The zero values of the
// optional fields select the defaults above or the SDK's usual behaviour.
type Config struct {
	// Endpoint is the server's base URL, e.g. "http://127.0.0.1:9000". Empty
	// means AWS S3 itself (or AWS_ENDPOINT_URL_S3 from the environment).
	Endpoint string
	// Region signs requests. Empty: the SDK's chain (AWS_REGION, shared
	// config), then DefaultRegion when Endpoint is set.
	Region string
	// Bucket is the S3 bucket; it must exist.
	Bucket string
	// Prefix is prepended to every key; List strips it again. Several
	// clusters (or test runs) can share one bucket under different prefixes.
	Prefix string
	// PathStyle addresses the bucket as ENDPOINT/BUCKET/KEY instead of
	// BUCKET.ENDPOINT/KEY; most self-hosted servers want it.
	PathStyle bool

	// AccessKey, SecretKey and SessionToken are explicit credentials. When
	// AccessKey is empty the SDK's usual chain is used (AWS_ACCESS_KEY_ID and
	// friends, shared config and credentials files, SSO, instance roles).
	AccessKey    string
	SecretKey    string
	SessionToken string

	// AttemptTimeout bounds each HTTP attempt; 0 means DefaultAttemptTimeout.
	AttemptTimeout time.Duration
	// MaxAttempts bounds the attempts of a repeatable operation (Get, List,
	// unconditional Put and Delete); 0 means DefaultMaxAttempts. Conditional
	// writes are always attempted once.
	MaxAttempts int
	// HTTPClient sends the requests; nil means the SDK's default client.
	HTTPClient HTTPClient
}

// Validate reports every problem with the configuration, before any
// network traffic.
func (c Config) Validate() error {
	var errs []error
	if c.Bucket == "" {
		errs = append(errs, errors.New("bucket is empty"))
	} else if strings.ContainsAny(c.Bucket, "/?#") {
		errs = append(errs, fmt.Errorf("bucket %q contains '/', '?' or '#'", c.Bucket))
	}
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("endpoint: %w", err))
		case u.Scheme != "http" && u.Scheme != "https":
			errs = append(errs, fmt.Errorf("endpoint %q: scheme must be http or https", c.Endpoint))
		case u.Host == "":
			errs = append(errs, fmt.Errorf("endpoint %q: no host", c.Endpoint))
		}
	}
	if !utf8.ValidString(c.Prefix) {
		errs = append(errs, errors.New("prefix is not UTF-8"))
	}
	if len(c.Prefix) >= ownership.MaxKeyLen {
		errs = append(errs, fmt.Errorf("prefix is %d bytes, leaving no room for keys under %d", len(c.Prefix), ownership.MaxKeyLen))
	}
	if (c.AccessKey == "") != (c.SecretKey == "") {
		errs = append(errs, errors.New("access key and secret key must be given together"))
	}
	if c.SessionToken != "" && c.AccessKey == "" {
		errs = append(errs, errors.New("session token without access key"))
	}
	if c.AttemptTimeout < 0 {
		errs = append(errs, fmt.Errorf("attempt timeout %v is negative", c.AttemptTimeout))
	}
	if c.MaxAttempts < 0 {
		errs = append(errs, fmt.Errorf("max attempts %d is negative", c.MaxAttempts))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("s3store config: %w", err)
	}
	return nil
}

// withDefaults fills the zero optional fields.
func (c Config) withDefaults() Config {
	if c.AttemptTimeout == 0 {
		c.AttemptTimeout = DefaultAttemptTimeout
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	return c
}
