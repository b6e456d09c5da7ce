package s3store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// op names the kind of request an error came from; the same status means
// different things to different requests (404 on a Get is "absent", on an
// If-Match put it is "refused").
type op uint8

const (
	opGet op = iota
	opPut
	opCondPut
	opDelete
	opCondDelete
	opList
)

// conditional reports whether a refusal of this request is a precondition.
func (o op) conditional() bool { return o == opCondPut || o == opCondDelete }

// S3 error codes the mapping needs by name.
const (
	codeConditionalConflict = "ConditionalRequestConflict"
	codeNoSuchBucket        = "NoSuchBucket"
	codeNoSuchKey           = "NoSuchKey"
)

// verdict is the classification of one attempt's error.
type verdict uint8

const (
	vLanded verdict = iota // not an error after all (404 on an unconditional delete)
	vNotFound
	vRefused
	vUnknown
	vFailed
)

// classify maps one attempt's error from the SDK to a verdict.
//
// Invariant (smithy-go's HTTP client handler and the SDK's ResponseErrorWrapper
// middleware): every error returned by the HTTP client is wrapped in a
// RequestSendError (or a CanceledError when the context ended), and every
// error raised after a response arrived is wrapped in a ResponseError that
// carries the status. An error with neither was raised before the request
// left the process (signing, credentials, serialization), so nothing can have
// been written and it is a plain failure.
func classify(o op, err error) verdict {
	var sendErr *smithyhttp.RequestSendError
	var canceled *smithy.CanceledError
	switch {
	case errors.Is(err, ownership.ErrUnknownOutcome):
		// Already decided by the code that made the call.
		return vUnknown
	case errors.As(err, &sendErr), errors.As(err, &canceled):
		return vUnknown
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return vUnknown
	}

	if status, ok := statusOf(err); ok {
		return classifyStatus(o, status, errorCode(err))
	}

	// Belt and braces for transport errors that reach us unwrapped, e.g. from
	// reading a response body ourselves.
	var netErr net.Error
	switch {
	case errors.As(err, &netErr),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.EPIPE):
		return vUnknown
	}
	return vFailed
}

func classifyStatus(o op, status int, code string) verdict {
	switch {
	case status == 0:
		// The SDK gives transport failures an empty stand-in response.
		return vUnknown
	case status >= 200 && status < 300:
		// A success status whose response could not be read: a write may
		// well have landed.
		return vUnknown
	case status == http.StatusPreconditionFailed:
		return vRefused
	case status == http.StatusConflict && code == codeConditionalConflict:
		// S3 answers a conditional write that lost a race with a concurrent
		// one 409 instead of 412. Either way ours did not land.
		return vRefused
	case status == http.StatusNotFound:
		if code == codeNoSuchBucket {
			// A missing bucket is a configuration error, never "the key
			// is absent": reporting it as absent would invite creates.
			return vFailed
		}
		switch {
		case o == opGet:
			return vNotFound
		case o.conditional():
			// If-Match on a missing key: S3 answers 404, the interface
			// says refused.
			return vRefused
		case o == opDelete && (code == codeNoSuchKey || code == ""):
			// Some servers answer 404 where S3 answers 204; the key is
			// absent either way, which is what the delete wanted.
			return vLanded
		}
		return vFailed
	case status == http.StatusNotImplemented:
		// The server does not support what the request asked for (S3
		// says so for headers it does not implement); it did nothing.
		return vFailed
	case status == http.StatusRequestTimeout, status == http.StatusTooManyRequests, status >= 500:
		// The server or a proxy in front of it gave up or shed load; a 5xx
		// can come after the write was applied.
		return vUnknown
	}
	return vFailed
}

// errorCode extracts the S3 error code ("NoSuchKey", ...), if any.
func errorCode(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	return ""
}

// wrap turns one attempt's error into the error a caller sees: the sentinel
// for the verdict, the operation, and the cause.
func wrap(v verdict, what string, err error) error {
	switch v {
	case vLanded:
		return nil
	case vNotFound:
		return fmt.Errorf("s3store: %s: %w: %w", what, ownership.ErrNotFound, err)
	case vRefused:
		return fmt.Errorf("s3store: %s: %w: %w", what, ownership.ErrPrecondition, err)
	case vUnknown:
		return fmt.Errorf("s3store: %s: %w: %w", what, ownership.ErrUnknownOutcome, err)
	}
	return fmt.Errorf("s3store: %s: %w", what, err)
}
