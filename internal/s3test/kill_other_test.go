//go:build !linux

package s3test

const helperEnv = "WASMKEEP_S3TEST_HELPER"

func runHelper() int { return 0 }
