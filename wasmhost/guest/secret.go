package guest

// Secret returns the application secret name (an API key, a token), and
// whether the node has it: false when no secret of that name is set, the
// node cannot open it, or the name is empty or over 128 bytes. Secrets are
// set with `wasmkeep secrets set NAME` and kept sealed in the bucket; the
// host never logs them, and a class should not either (nor answer them,
// nor store them). It may be called during any event.
func Secret(name string) ([]byte, bool) {
	n := secretLen(name)
	if n < 0 {
		return nil, false
	}
	v := make([]byte, n)
	secretRead(v)
	return v, true
}
