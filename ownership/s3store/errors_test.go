package s3store

import (
	"net/http"
	"testing"
)

// TestClassifyStatus pins the meaning of every status the store can see, per
// kind of request.
func TestClassifyStatus(t *testing.T) {
	tests := []struct {
		op     op
		status int
		code   string
		want   verdict
	}{
		{opCondPut, http.StatusPreconditionFailed, "PreconditionFailed", vRefused},
		{opCondDelete, http.StatusPreconditionFailed, "PreconditionFailed", vRefused},
		{opCondPut, http.StatusConflict, codeConditionalConflict, vRefused},
		{opCondPut, http.StatusConflict, "OperationAborted", vFailed},
		{opCondPut, http.StatusNotFound, codeNoSuchKey, vRefused},
		{opCondDelete, http.StatusNotFound, codeNoSuchKey, vRefused},
		{opCondPut, http.StatusNotFound, codeNoSuchBucket, vFailed},
		{opGet, http.StatusNotFound, codeNoSuchKey, vNotFound},
		{opGet, http.StatusNotFound, "", vNotFound},
		{opGet, http.StatusNotFound, codeNoSuchBucket, vFailed},
		{opDelete, http.StatusNotFound, codeNoSuchKey, vLanded},
		{opDelete, http.StatusNotFound, codeNoSuchBucket, vFailed},
		{opPut, http.StatusNotFound, codeNoSuchBucket, vFailed},
		{opList, http.StatusNotFound, codeNoSuchBucket, vFailed},
		{opCondPut, http.StatusInternalServerError, "InternalError", vUnknown},
		{opCondPut, http.StatusServiceUnavailable, "SlowDown", vUnknown},
		{opGet, http.StatusBadGateway, "", vUnknown},
		{opCondPut, http.StatusRequestTimeout, "", vUnknown},
		{opCondPut, http.StatusTooManyRequests, "", vUnknown},
		{opCondPut, http.StatusOK, "", vUnknown},
		{opCondPut, 0, "", vUnknown},
		{opCondPut, http.StatusForbidden, "AccessDenied", vFailed},
		{opGet, http.StatusBadRequest, "InvalidArgument", vFailed},
		{opCondPut, http.StatusNotImplemented, "NotImplemented", vFailed},
	}
	for _, tt := range tests {
		if got := classifyStatus(tt.op, tt.status, tt.code); got != tt.want {
			t.Errorf("classifyStatus(op %d, %d, %q) = %d, want %d", tt.op, tt.status, tt.code, got, tt.want)
		}
	}
}
